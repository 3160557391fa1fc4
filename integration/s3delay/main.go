// Command s3delay is an HTTP proxy that adds a fixed latency to every request before passing it
// on to an S3 server: benchmarks on one machine put it in front of a local server (versitygw on
// 127.0.0.1, which answers in well under a millisecond) to compare S3 clients at the time to
// first byte of a real object store (an in-region S3 GET: about 10-30 ms).
//
//	s3delay --target http://127.0.0.1:PORT --delay 10ms
//
// It listens on 127.0.0.1 at a free port (--listen to choose) and prints its endpoint,
// http://127.0.0.1:PORT, as its first line of output once it accepts connections. The Host
// header is passed on unchanged, so SigV4 signatures made for the proxy's address stay valid.
// It runs until killed.
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"sync"
	"time"
)

func main() {
	target := flag.String("target", "", "the S3 server's endpoint, http://HOST:PORT (required)")
	delay := flag.Duration("delay", 10*time.Millisecond, "latency added to every request before it is passed on")
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	flag.Parse()
	u, err := url.Parse(*target)
	if err != nil || u.Scheme != "http" || u.Host == "" || *delay < 0 {
		fmt.Fprintln(os.Stderr, "usage: s3delay --target http://HOST:PORT [--delay 10ms] [--listen 127.0.0.1:0]")
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "s3delay:", err)
		os.Exit(1)
	}
	fmt.Printf("http://%s\n", ln.Addr())
	fmt.Fprintln(os.Stderr, "s3delay:", http.Serve(ln, delayed(u, *delay)))
	os.Exit(1)
}

// delayed returns the proxy's handler: it waits delay, then passes the request on to target.
func delayed(target *url.URL, delay time.Duration) http.Handler {
	proxy := httputil.NewSingleHostReverseProxy(target) // keeps the request's Host header
	proxy.Transport = &http.Transport{MaxIdleConns: 512, MaxIdleConnsPerHost: 512, IdleConnTimeout: time.Minute}
	// Bodies are copied in 1 MiB pieces, each written on as soon as it is read (a write this
	// large bypasses the response's buffer; GET answers carry a Content-Length, so nothing
	// waits for a flush). With the default 32 KiB pieces, flushed one by one, the proxy took
	// 14% of the machine's CPU in a cold epoch of aifs over S3 at 32 readers
	// (docs/bench/README.md): CPU a real object store's latency does not cost its clients.
	proxy.BufferPool = &bufferPool{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(delay)
		proxy.ServeHTTP(w, r)
	})
}

// bufferPool lends the proxy its 1 MiB copy buffers (httputil.BufferPool).
type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte {
	if v, ok := b.p.Get().(*[]byte); ok {
		return *v
	}
	return make([]byte, 1<<20)
}

func (b *bufferPool) Put(buf []byte) { b.p.Put(&buf) }
