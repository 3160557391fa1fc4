package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"strconv"
	"strings"
	"sync"
)

// listenAddr returns addr with 127.0.0.1 as its host if it names none ("9400" or ":9400"): the
// metrics endpoint (with Go's profiles) is reachable from other hosts only when asked for by
// name ("0.0.0.0:9400").
func listenAddr(addr string) string {
	if !strings.Contains(addr, ":") {
		addr = ":" + addr
	}
	if host, port, err := net.SplitHostPort(addr); err == nil && host == "" {
		return net.JoinHostPort("127.0.0.1", port)
	}
	return addr
}

// metricsServer is the --metrics-addr endpoint: Prometheus text at /metrics and the live
// daemon's Go profiles under /debug/pprof/ (go tool pprof http://ADDR/debug/pprof/profile). It
// owns the goroutine that accepts connections and those that serve them; Close ends them all.
type metricsServer struct {
	srv   *http.Server
	addr  string
	done  chan struct{}  // closed when the accepting goroutine has returned
	conns sync.WaitGroup // connections not yet closed: one per StateNew, done at StateClosed or StateHijacked

	closeOnce sync.Once
	closeErr  error // what the first Close returned
}

// metricsEnv names the file descriptor of the metrics listener that a keeper opened for its
// daemons (keeper.go): each serves on it, so that two overlap during an upgrade.
const metricsEnv = "AIFS_METRICS_FD"

// metricsListener returns the listener named by $AIFS_METRICS_FD, else a new one on addr.
func metricsListener(addr string) (net.Listener, error) {
	if fd, err := strconv.Atoi(os.Getenv(metricsEnv)); err == nil {
		f := os.NewFile(uintptr(fd), "metrics")
		defer f.Close()
		return net.FileListener(f)
	}
	return net.Listen("tcp", listenAddr(addr))
}

// startMetrics listens on addr (as listenAddr completes it) and serves in the background until
// Close. writeMetrics writes the Prometheus text for one GET /metrics; it is called from the
// server's goroutines, concurrently.
func startMetrics(addr string, writeMetrics func(io.Writer)) (*metricsServer, error) {
	l, err := metricsListener(addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		writeMetrics(w)
	})
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	m := &metricsServer{addr: l.Addr().String(), done: make(chan struct{})}
	m.srv = &http.Server{Handler: mux, ConnState: func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew: // called by Serve before it can return, so before Close waits
			m.conns.Add(1)
		case http.StateClosed, http.StateHijacked:
			m.conns.Done()
		}
	}}
	go func() {
		defer close(m.done)
		m.srv.Serve(l) // returns http.ErrServerClosed after Close; no other error ends it
	}()
	return m, nil
}

// Addr returns the address the server listens on, with the port chosen when addr gave port 0.
func (m *metricsServer) Addr() string { return m.addr }

// Close stops the server: it closes the listener and every connection, which cancels the
// requests in flight (a CPU profile being taken ends early), and returns once every goroutine
// of the server has returned. It is idempotent and safe for concurrent use; every call returns
// the error of closing the listener, if any.
func (m *metricsServer) Close() error {
	m.closeOnce.Do(func() {
		if err := m.srv.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			m.closeErr = fmt.Errorf("--metrics-addr %s: close: %w", m.addr, err)
		}
		<-m.done
		m.conns.Wait()
	})
	return m.closeErr
}
