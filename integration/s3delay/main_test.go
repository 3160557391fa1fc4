package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestDelayed: requests through the proxy reach the server with their Host header unchanged
// (SigV4 signs it) and their bodies whole, get the server's answers whole (3 MiB: several
// splices), and each request on a kept-alive connection takes at least the delay, the first
// and the later ones.
func TestDelayed(t *testing.T) {
	big := make([]byte, 3<<20+17)
	for i := range big {
		big[i] = byte(rand.Uint32())
	}
	var gotHost string
	var gotBody [32]byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotHost = r.Host
		if r.Method == http.MethodPut {
			b, _ := io.ReadAll(r.Body)
			gotBody = sha256.Sum256(b)
			return
		}
		w.Header().Set("ETag", `"abc"`)
		if r.URL.Path == "/bucket/big" {
			w.Header().Set("Content-Length", strconv.Itoa(len(big)))
			w.Write(big)
			return
		}
		io.WriteString(w, "body of "+r.URL.Path)
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const delay = 50 * time.Millisecond
	go serve(ln, u.Host, delay, throttle{})
	proxyURL := "http://" + ln.Addr().String()

	conns := 0 // the connections the client dialled
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			conns++
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}}

	get := func(path string) ([]byte, time.Duration) {
		t.Helper()
		start := time.Now()
		resp, err := client.Get(proxyURL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.Header.Get("ETag") != `"abc"` {
			t.Errorf("GET %s through the proxy: ETag %q", path, resp.Header.Get("ETag"))
		}
		return body, time.Since(start)
	}
	for i := range 3 {
		body, took := get("/bucket/key")
		if string(body) != "body of /bucket/key" {
			t.Errorf("request %d through the proxy: %q", i, body)
		}
		if took < delay {
			t.Errorf("request %d took %v, less than the %v delay", i, took, delay)
		}
	}
	body, took := get("/bucket/big")
	if !bytes.Equal(body, big) {
		t.Errorf("a %d-byte answer through the proxy came back as %d bytes, equal: false", len(big), len(body))
	}
	if took < delay {
		t.Errorf("the big answer took %v, less than the %v delay", took, delay)
	}
	req, _ := http.NewRequest(http.MethodPut, proxyURL+"/bucket/put", bytes.NewReader(big))
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if took := time.Since(start); took < delay {
		t.Errorf("the PUT took %v, less than the %v delay", took, delay)
	}
	if gotBody != sha256.Sum256(big) {
		t.Error("the PUT's body reached the server changed")
	}
	if want := ln.Addr().String(); gotHost != want {
		t.Errorf("the server saw Host %q, want the proxy's %q (what the client signed)", gotHost, want)
	}
	if conns != 1 {
		t.Errorf("the client made %d connections, want 1 (the requests after the first test the delay on a kept-alive connection)", conns)
	}
}

// TestThrottle: with --throttle 1, GETs in the window get S3's 503 SlowDown from the proxy (the
// server never sees them) on a connection that stays usable; after the window they pass again.
func TestThrottle(t *testing.T) {
	var seen atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const span = 300 * time.Millisecond
	go serve(ln, u.Host, 0, throttle{share: 1, from: time.Now(), until: time.Now().Add(span)})
	get := func() (int, string) {
		resp, err := http.Get("http://" + ln.Addr().String() + "/bucket/key")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for range 3 {
		if code, body := get(); code != http.StatusServiceUnavailable || !strings.Contains(body, "<Code>SlowDown</Code>") {
			t.Errorf("a GET while throttling: %d %q, want 503 SlowDown", code, body)
		}
	}
	if n := seen.Load(); n != 0 {
		t.Errorf("the server saw %d throttled requests", n)
	}
	time.Sleep(span)
	if code, body := get(); code != http.StatusOK || body != "ok" {
		t.Errorf("a GET after the throttling: %d %q", code, body)
	}
}
