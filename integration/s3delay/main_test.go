package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"
)

// TestDelayed: a request through the proxy reaches the server with its Host header unchanged
// (SigV4 signs it), gets the server's answer, and takes at least the delay.
func TestDelayed(t *testing.T) {
	var gotHost string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotHost = r.Host
		w.Header().Set("ETag", `"abc"`)
		io.WriteString(w, "body of "+r.URL.Path)
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	const delay = 50 * time.Millisecond
	proxy := httptest.NewServer(delayed(u, delay))
	defer proxy.Close()

	start := time.Now()
	resp, err := http.Get(proxy.URL + "/bucket/key")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	took := time.Since(start)
	if string(body) != "body of /bucket/key" || resp.Header.Get("ETag") != `"abc"` {
		t.Errorf("through the proxy: %q, ETag %q", body, resp.Header.Get("ETag"))
	}
	if want := proxy.Listener.Addr().String(); gotHost != want {
		t.Errorf("the server saw Host %q, want the proxy's %q (what the client signed)", gotHost, want)
	}
	if took < delay {
		t.Errorf("the request took %v, less than the %v delay", took, delay)
	}
}
