//go:build integration

package integration

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// startThrottler starts integration/s3delay in front of endpoint with args (--throttle ...) and
// returns the endpoint it serves.
func startThrottler(t *testing.T, endpoint string, args ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "s3delay")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/aifs/aifs/integration/s3delay").CombinedOutput(); err != nil {
		t.Fatalf("go build s3delay: %v: %s", err, out)
	}
	cmd := exec.Command(bin, append([]string{"--target", endpoint, "--delay", "1ms"}, args...)...)
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line := bufio.NewScanner(out)
	if !line.Scan() {
		t.Fatal("s3delay printed no endpoint")
	}
	return line.Text()
}

// TestS3Throttling: behind a server that answers 30% of GETs 503 SlowDown for 20 s, a shuffled
// epoch of 8 readers completes with no error and the source's bytes, the throttled answers
// counted; behind one that throttles every GET, a read fails with EIO after the retry budget,
// (retries+1)×timeout, not before and not much after, and succeeds once the throttling ends.
func TestS3Throttling(t *testing.T) {
	srv := s3Server(t)
	src, url := s3JPEGSet(t, srv, "throttle")

	ep := startThrottler(t, srv.Endpoint, "--throttle", "0.3", "--throttle-for", "20s")
	mnt := mountSet(t, url, "--s3-endpoint", ep, "-o", "kernel_cache=off,mem_cache=1M")
	errs, stalls, longest := epochUnder(t, src, mnt, nil)
	for _, err := range errs[:min(len(errs), 5)] {
		t.Errorf("a reader under 30%% throttling: %v", err)
	}
	throttled, retries := storageStat(t, mnt, "s3", "throttled"), storageStat(t, mnt, "s3", "retries")
	if throttled == 0 {
		t.Error("no throttled answer counted behind a proxy throttling 30% of GETs")
	}
	t.Logf("30%% throttled: %d answers throttled, %d retries, %d limit now; %d reads over 100 ms, the longest %v",
		throttled, retries, storageStat(t, mnt, "s3", "in_flight_limit"), stalls, longest)

	// The mount reads the index before the throttling starts.
	const after, window = 3 * time.Second, 8 * time.Second
	ep = startThrottler(t, srv.Endpoint, "--throttle", "1", "--throttle-after", after.String(), "--throttle-for", window.String())
	began := time.Now() // s3delay printed its endpoint: the throttling starts after from its start, before this
	mnt = mountSet(t, url, "--s3-endpoint", ep, "--s3-timeout", "1s", "--s3-retries", "1", "-o", "kernel_cache=off,mem_cache=1M")
	time.Sleep(time.Until(began.Add(after + 100*time.Millisecond)))
	victim := lastFile(t, src)
	requests := storageStat(t, mnt, "s3", "requests")
	start := time.Now()
	_, err := os.ReadFile(filepath.Join(mnt, victim))
	took := time.Since(start)
	// The budget: (1+1) × 1 s; the last wait before it ends is at most the 2 s backoff cap.
	if !errors.Is(err, syscall.EIO) || took < 2*time.Second || took > 5*time.Second {
		t.Errorf("a read behind a server throttling every GET: %v after %v, want EIO after 2-5 s (%d S3 requests, %d before)",
			err, took, storageStat(t, mnt, "s3", "requests"), requests)
	}
	time.Sleep(time.Until(began.Add(after + window + 500*time.Millisecond)))
	sameFile(t, src, mnt, victim)
}

// lastFile returns the path, relative to root, of the last file under it in walk order.
func lastFile(t *testing.T, root string) string {
	t.Helper()
	var last string
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			last, _ = filepath.Rel(root, p)
		}
		return nil
	})
	if last == "" {
		t.Fatalf("no file under %s", root)
	}
	return last
}

// TestS3CredentialsRotate: the server's keys are rotated mid-epoch and the shared credentials
// file is rewritten (renamed over, as Kubernetes updates a secret): the epoch of 8 readers
// completes with no error, and the mount counts the credentials it read again.
func TestS3CredentialsRotate(t *testing.T) {
	srv := s3Server(t)
	src, url := s3JPEGSet(t, srv, "rotate")
	file := filepath.Join(t.TempDir(), "credentials")
	writeCreds := func(access, secret string) {
		tmp := file + ".new"
		writeFile(t, tmp, []byte("[default]\naws_access_key_id = "+access+"\naws_secret_access_key = "+secret+"\n"))
		if err := os.Rename(tmp, file); err != nil {
			t.Fatal(err)
		}
	}
	writeCreds(srv.AccessKey, srv.SecretKey)
	t.Setenv("AWS_ACCESS_KEY_ID", "") // the shared file is the source
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", file)
	mnt := mountSet(t, url, "--s3-endpoint", srv.Endpoint, "-o", "kernel_cache=off,mem_cache=1M")
	done := make(chan []error)
	go func() {
		errs, _, _ := epochUnder(t, src, mnt, nil)
		done <- errs
	}()
	time.Sleep(200 * time.Millisecond)
	srv.RotateKeys("AKROTATED", "rotated-secret-key-0123456789")
	writeCreds(srv.AccessKey, srv.SecretKey)
	errs := <-done
	for _, err := range errs[:min(len(errs), 5)] {
		t.Errorf("a reader across the key rotation: %v", err)
	}
	if n := storageStat(t, mnt, "s3", "credential_refreshes"); n == 0 {
		t.Error("the mount read no new credentials after the rotation")
	}
	errs, _, _ = epochUnder(t, src, mnt, nil)
	for _, err := range errs[:min(len(errs), 5)] {
		t.Errorf("a reader after the key rotation: %v", err)
	}
}
