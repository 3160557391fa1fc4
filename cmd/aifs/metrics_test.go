package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"testing"
	"time"
)

// TestListenAddr: the metrics endpoint listens on localhost unless an address names a host.
func TestListenAddr(t *testing.T) {
	for in, want := range map[string]string{
		"9400":           "127.0.0.1:9400",
		":9400":          "127.0.0.1:9400",
		"127.0.0.1:9400": "127.0.0.1:9400",
		"0.0.0.0:9400":   "0.0.0.0:9400",
		"[::1]:9400":     "[::1]:9400",
		"localhost:0":    "localhost:0",
	} {
		if got := listenAddr(in); got != want {
			t.Errorf("listenAddr(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestMetricsServerClose: the metrics server serves /metrics and the profiles until Close, which
// ends a CPU profile in flight, returns once the server's goroutines are gone, frees the port,
// and may be called again.
func TestMetricsServerClose(t *testing.T) {
	m, err := startMetrics("127.0.0.1:0", func(w io.Writer) { io.WriteString(w, "aifs_test 1\n") })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	get := func(path string) (string, error) {
		resp, err := http.Get("http://" + m.Addr() + path)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("%s", resp.Status)
		}
		return string(b), err
	}
	if body, err := get("/metrics"); err != nil || body != "aifs_test 1\n" {
		t.Fatalf("GET /metrics: %q, %v", body, err)
	}
	if _, err := get("/debug/pprof/"); err != nil {
		t.Fatalf("GET /debug/pprof/: %v", err)
	}

	// A 60 s CPU profile is in flight when Close comes; Close must not wait for it.
	profile := make(chan error, 1)
	go func() { _, err := get("/debug/pprof/profile?seconds=60"); profile <- err }()
	waitCPUProfile(t)
	closed := make(chan error, 1)
	go func() { closed <- m.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Close did not return while a CPU profile was being taken")
	}
	select {
	case <-m.done:
	default:
		t.Error("Close returned before the serving goroutine")
	}
	if err := <-profile; err == nil {
		t.Error("the CPU profile in flight completed after Close")
	}
	if err := m.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := get("/metrics"); err == nil {
		t.Error("GET /metrics after Close succeeded")
	}
	l, err := net.Listen("tcp", m.Addr())
	if err != nil {
		t.Fatalf("the port is still taken after Close: %v", err)
	}
	l.Close()
}

// waitCPUProfile waits until a goroutine of this process is in the CPU profile handler.
func waitCPUProfile(t *testing.T) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if bytes.Contains(buf[:runtime.Stack(buf, true)], []byte("net/http/pprof.Profile(")) {
			return
		}
		if time.Now().After(end) {
			t.Fatal("the CPU profile request has not reached its handler")
		}
	}
}
