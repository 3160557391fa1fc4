package s3

import (
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Credentials that change under a long mount (docs/s3.md, "Credentials"). minio-go re-reads a
// source whose credentials expire (the instance role; a web identity token file, re-read at each
// renewal); sharedFile adds the shared credentials file, read again when it changes on disk;
// and an answer that says the credentials are wrong makes the Backend read its source again
// (refreshCreds) before it retries.

// sharedFile is the shared credentials file as a minio-go Provider that expires when the file
// changes: its size, modification time or inode (a rewrite, or a rename over it, as Kubernetes
// updates a mounted secret) differ from those it was read with. The file is looked at once a
// second at most.
type sharedFile struct {
	credentials.FileAWSCredentials

	mu      sync.Mutex
	read    fileStamp // the file when last retrieved
	expires time.Time // the session token's expiry the file gave, if any
	checked time.Time // when IsExpired last looked at the file
	changed bool
}

// fileStamp tells one version of a file from another.
type fileStamp struct {
	size, ino uint64
	mtime     time.Time
}

// stampOf returns the stamp of the shared credentials file of minio-go's FileAWSCredentials:
// $AWS_SHARED_CREDENTIALS_FILE, else ~/.aws/credentials; a missing file has the zero stamp.
func stampOf(name string) fileStamp {
	if name == "" {
		name = os.Getenv("AWS_SHARED_CREDENTIALS_FILE")
	}
	if name == "" {
		home, _ := os.UserHomeDir()
		name = filepath.Join(home, ".aws", "credentials")
	}
	fi, err := os.Stat(name)
	if err != nil {
		return fileStamp{}
	}
	st := fileStamp{size: uint64(fi.Size()), mtime: fi.ModTime()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.ino = sys.Ino
	}
	return st
}

func (p *sharedFile) RetrieveWithCredContext(cc *credentials.CredContext) (credentials.Value, error) {
	stamp := stampOf(p.Filename)
	v, err := p.FileAWSCredentials.RetrieveWithCredContext(cc)
	p.mu.Lock()
	p.read, p.changed, p.checked, p.expires = stamp, err != nil, time.Now(), v.Expiration
	p.mu.Unlock()
	return v, err
}

func (p *sharedFile) Retrieve() (credentials.Value, error) { return p.RetrieveWithCredContext(nil) }

// IsExpired reports whether the credentials read must be read again: the file changed since,
// or they expire (a session token's expiry in the file, a minute early). minio-go's own
// FileAWSCredentials has them expire at once, so that every request read and parsed the file.
func (p *sharedFile) IsExpired() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.changed && time.Since(p.checked) >= time.Second {
		p.checked, p.changed = time.Now(), stampOf(p.Filename) != p.read
	}
	return p.changed || !p.expires.IsZero() && time.Now().After(p.expires.Add(-time.Minute))
}

// refreshCreds reads the Backend's credentials from their source again, after the server said
// they are wrong, and reports whether they changed (then the request is worth sending again).
func (b *Backend) refreshCreds() bool {
	old, _ := b.creds.GetWithContext(nil)
	b.creds.Expire()
	now, err := b.creds.GetWithContext(nil)
	changed := err == nil && (now.AccessKeyID != old.AccessKeyID || now.SecretAccessKey != old.SecretAccessKey ||
		now.SessionToken != old.SessionToken)
	if changed {
		b.credRefreshes.Add(1)
	}
	return changed
}
