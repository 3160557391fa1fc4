package erofsmeta

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/aifs/aifs/layout"
)

// FormatVersion is the version of the images Build writes. It is part of a cached image's name,
// so a change to what Build writes (go-erofs's version, the tree's attributes) takes a step here
// and images cached before are rebuilt, not reused.
const FormatVersion = 1

// ImagePrefix begins the name of every cached image. In a shard set's directory, names beginning
// with ".aifs-" are aifs's own (layout/pack removes them when it replaces the set).
const ImagePrefix = ".aifs-erofs-"

// SystemCacheDir is where Cached keeps images, for root, when the index's directory is not
// writable; other users get os.UserCacheDir()/aifs/erofs.
const SystemCacheDir = "/var/cache/aifs/erofs"

// systemCacheDir is SystemCacheDir, which tests change.
var systemCacheDir = SystemCacheDir

// Cached returns the path of x's image and its block size, building it with the block size
// Check chooses if there is none yet. The image lies beside the index, in indexDir, or, where
// indexDir is not writable (a read-only or another user's set), in SystemCacheDir (root) or
// os.UserCacheDir()/aifs/erofs, under a name that also holds a hash of indexDir's absolute path.
// It is named by the index's identity and entry count, FormatVersion and the block size, and
// the SHA-256 of its bytes: one is reused only if its bytes have that hash, it is a regular file
// of this user's and no one else may write it (the kernel parses it). A new one is written
// under a temporary name, synced and renamed into place, and the images of other indexes there
// are removed. Cached runs Check (so it reads the whole index) every time; it writes nothing
// from an index that fails it.
//
// Concurrent calls for one set are safe: each writes its own temporary file, and the last
// rename wins with the same bytes.
//
// Where there is no image yet and building one would take more than maxBuild bytes of memory
// (BuildBytes; 0: no bound), Cached builds none and gives a *NotServable that says so.
func Cached(x *layout.Index, indexDir string, maxBuild int64) (imagePath string, blockSize int, err error) {
	bs, err := Check(x)
	if err != nil {
		return "", 0, err
	}
	abs, err := filepath.Abs(indexDir)
	if err != nil {
		return "", 0, fmt.Errorf("erofs image cache: %w", err)
	}
	key := fmt.Sprintf("%08x-%d-v%d-b%d-", x.Identity(), x.Len(), FormatVersion, bs)
	if p, ok := findCached(abs, ImagePrefix+key); ok {
		return p, bs, nil
	}
	shared, prefix, sharedErr := sharedDir(abs)
	if sharedErr == nil {
		if p, ok := findCached(shared, ImagePrefix+prefix+key); ok {
			return p, bs, nil
		}
	}
	if need := BuildBytes(x.Len()); maxBuild > 0 && need > maxBuild {
		return "", 0, notServable("building the EROFS image of %d entries takes about %d MB of memory, more than the %d MB this process may take (half of what is available): mount it on a machine with more memory once (the image is kept, docs/kernel.md), or read it through FUSE",
			x.Len(), need>>20, maxBuild>>20)
	}
	dir, pre := abs, ""
	name, err := buildAtomic(x, bs, dir, ImagePrefix+key)
	if errors.Is(err, errNotWritable) {
		if sharedErr != nil {
			return "", 0, fmt.Errorf("erofs image cache: %s is not writable and %w", indexDir, sharedErr)
		}
		if err := os.MkdirAll(shared, 0o755); err != nil {
			return "", 0, fmt.Errorf("erofs image cache: %s is not writable and %w", indexDir, err)
		}
		dir, pre = shared, prefix
		name, err = buildAtomic(x, bs, dir, ImagePrefix+pre+key)
	}
	if err != nil {
		return "", 0, err
	}
	removeStale(dir, ImagePrefix+pre, name)
	return filepath.Join(dir, name), bs, nil
}

// BuildBytes is about how much memory Build takes for an index of entries entries: go-erofs holds
// the whole tree until the image is written, 0.85 KB an entry measured (docs/bench/erofs-notes.md),
// taken as 1 KiB.
func BuildBytes(entries int) int64 { return int64(entries) << 10 }

// sharedDir returns the directory the image of the set in indexDir (absolute) is kept in when
// indexDir is not writable, and the prefix its name takes there: a hash of indexDir.
func sharedDir(indexDir string) (dir, prefix string, err error) {
	dir = systemCacheDir
	if os.Geteuid() != 0 {
		user, err := os.UserCacheDir()
		if err != nil {
			return "", "", fmt.Errorf("there is no cache directory: %w", err)
		}
		dir = filepath.Join(user, "aifs", "erofs")
	}
	h := sha256.Sum256([]byte(indexDir))
	return dir, hex.EncodeToString(h[:6]) + "-", nil
}

// errNotWritable is buildAtomic's error when it cannot create a file in the directory.
var errNotWritable = errors.New("directory not writable")

// findCached returns an image in dir whose name begins with key and whose bytes hash to the rest
// of its name, owned by this user and writable by no one else.
func findCached(dir, key string) (string, bool) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", false
	}
	for _, de := range ents {
		name := de.Name()
		want, ok := strings.CutPrefix(name, key)
		if !ok || !strings.HasSuffix(want, ".img") {
			continue
		}
		p := filepath.Join(dir, name)
		if b, ok := readOwn(p); ok {
			sum := sha256.Sum256(b)
			if hex.EncodeToString(sum[:8])+".img" == want {
				return p, true
			}
		}
	}
	return "", false
}

// readOwn returns the bytes of the regular file at p if this user owns it and no one else may
// write it.
func readOwn(p string) ([]byte, bool) {
	f, err := os.Open(p)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o022 != 0 {
		return nil, false
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Geteuid() {
		return nil, false
	}
	b, err := io.ReadAll(f)
	return b, err == nil
}

// buildAtomic builds x's image into a temporary file in dir, synced and renamed to key followed
// by its hash, and returns that name.
func buildAtomic(x *layout.Index, bs int, dir, key string) (name string, err error) {
	f, err := os.CreateTemp(dir, ImagePrefix+"tmp-*")
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) {
		return "", fmt.Errorf("%w: %w", errNotWritable, err)
	}
	if err != nil {
		return "", fmt.Errorf("erofs image cache: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := Build(x, f, bs); err != nil {
		return "", err
	}
	h := sha256.New()
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", fmt.Errorf("erofs image cache: %w", err)
	}
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("erofs image cache: read back %s: %w", f.Name(), err)
	}
	name = key + hex.EncodeToString(h.Sum(nil)[:8]) + ".img"
	if err := f.Chmod(0o644); err != nil {
		return "", fmt.Errorf("erofs image cache: %w", err)
	}
	if err := f.Sync(); err != nil {
		return "", fmt.Errorf("erofs image cache: sync %s: %w", f.Name(), err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("erofs image cache: %w", err)
	}
	if err := os.Rename(f.Name(), filepath.Join(dir, name)); err != nil {
		return "", fmt.Errorf("erofs image cache: %w", err)
	}
	return name, nil
}

// removeStale removes the images in dir whose names begin with prefix, except keep: those of
// indexes that the set's index replaced. An image mounted still is the kernel's to keep open.
func removeStale(dir, prefix, keep string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, de := range ents {
		if n := de.Name(); n != keep && strings.HasPrefix(n, prefix) && strings.HasSuffix(n, ".img") {
			os.Remove(filepath.Join(dir, n)) // another's, or gone already: left as it is
		}
	}
}
