package main

import "testing"

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
