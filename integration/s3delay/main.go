// Command s3delay is a TCP proxy that adds a fixed latency to every HTTP request before passing
// it on to an S3 server: benchmarks on one machine put it in front of a local server
// (versitygw on 127.0.0.1, which answers in well under a millisecond) to compare S3 clients at
// the time to first byte of a real object store (an in-region S3 GET: about 10-30 ms).
//
//	s3delay --target http://127.0.0.1:PORT --delay 10ms
//
// With --throttle SHARE it also plays a throttling S3 server: for --throttle-for (from
// --throttle-after after its start) it answers that share of GET requests itself with 503
// SlowDown, as S3 does under a request storm, without passing them on.
//
// It listens on 127.0.0.1 at a free port (--listen to choose) and prints its endpoint,
// http://127.0.0.1:PORT, as its first line of output once it accepts connections. It runs
// until killed.
//
// It works on the bytes, not on HTTP: each client connection gets its own connection to the
// target, the bytes of a request are held for the delay before they are passed on, and the
// answers are moved back with splice(2), without copying them through the proxy. A request
// is the first bytes a client sends on a connection, or the first it sends after the server
// has answered (HTTP/1.1 clients, S3's among them, send a request only once the answer to the
// previous one is read). The Host header and everything else pass unchanged, so SigV4
// signatures made for the proxy's address stay valid.
//
// Why splice: an HTTP reverse proxy (net/http/httputil) reads every answer into its memory and
// writes it out again. In a cold epoch of aifs over S3 at 32 readers on the 2-core
// development VM that cost 51-70 µs of CPU a sample, 13% of the machine (docs/bench/README.md):
// CPU a real object store's latency does not cost its clients.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	target := flag.String("target", "", "the S3 server's endpoint, http://HOST:PORT (required)")
	delay := flag.Duration("delay", 10*time.Millisecond, "latency added to every request before it is passed on")
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	share := flag.Float64("throttle", 0, "share of GET requests answered 503 SlowDown while throttling (0 to 1)")
	after := flag.Duration("throttle-after", 0, "throttling starts this long after s3delay starts")
	span := flag.Duration("throttle-for", 0, "throttling lasts this long (0: forever)")
	flag.Parse()
	u, err := url.Parse(*target)
	if err != nil || u.Scheme != "http" || u.Host == "" || *delay < 0 || *share < 0 || *share > 1 {
		fmt.Fprintln(os.Stderr, "usage: s3delay --target http://HOST:PORT [--delay 10ms] [--listen 127.0.0.1:0] [--throttle SHARE [--throttle-after D] [--throttle-for D]]")
		os.Exit(2)
	}
	th := throttle{share: *share, from: time.Now().Add(*after)}
	if *span > 0 {
		th.until = th.from.Add(*span)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "s3delay:", err)
		os.Exit(1)
	}
	fmt.Printf("http://%s\n", ln.Addr())
	fmt.Fprintln(os.Stderr, "s3delay:", serve(ln, u.Host, *delay, th))
	os.Exit(1)
}

// serve accepts connections on ln and proxies each to target (HOST:PORT) until ln fails.
func serve(ln net.Listener, target string, delay time.Duration, th throttle) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go proxy(c.(*net.TCPConn), target, delay, th)
	}
}

// throttle says which requests s3delay answers 503 SlowDown itself: a share of the GETs between
// from and until (zero: no end).
type throttle struct {
	share       float64
	from, until time.Time
}

// slowDown is S3's answer to a request it throttles.
var slowDown = func() string {
	body := `<?xml version="1.0" encoding="UTF-8"?>` + "\n" +
		`<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`
	return fmt.Sprintf("HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}()

// refuses reports whether the request req, read whole, gets slowDown now.
func (th throttle) refuses(req []byte) bool {
	now := time.Now()
	return th.share > 0 && now.After(th.from) && (th.until.IsZero() || now.Before(th.until)) &&
		bytes.HasPrefix(req, []byte("GET ")) && bytes.HasSuffix(req, []byte("\r\n\r\n")) && rand.Float64() < th.share
}

// proxy passes the bytes of one client connection to a new connection to target and back,
// holding each request for delay, until either side closes or fails; then it closes both.
func proxy(client *net.TCPConn, target string, delay time.Duration, th throttle) {
	defer client.Close()
	c, err := net.Dial("tcp", target)
	if err != nil {
		fmt.Fprintln(os.Stderr, "s3delay:", err)
		return
	}
	server := c.(*net.TCPConn)
	defer server.Close()
	var answered atomic.Bool // the server has sent bytes since the client's last were passed on
	answered.Store(true)     // the first bytes are a request
	go func() {
		if err := spliceAll(client, server, &answered); err != nil && !errors.Is(err, net.ErrClosed) {
			fmt.Fprintln(os.Stderr, "s3delay: answers:", err)
		}
		client.Close() // ends the loop below
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := client.Read(buf)
		if n > 0 {
			if answered.Load() && th.refuses(buf[:n]) {
				time.Sleep(delay)
				if _, err := io.WriteString(client, slowDown); err != nil {
					return
				}
				continue // answered stays true: the client's next bytes are a request
			}
			if answered.Swap(false) {
				time.Sleep(delay)
			}
			if _, err := server.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// spliceMax is the most bytes one splice moves: the pipe is grown to it (Linux's default pipe
// of 64 KiB would take 64 round trips for a 4 MiB cache chunk).
const spliceMax = 1 << 20

// spliceAll moves src's bytes to dst through a pipe with splice(2) until src's end, setting
// answered each time bytes arrive. It returns nil at src's end.
func spliceAll(dst, src *net.TCPConn, answered *atomic.Bool) error {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return fmt.Errorf("pipe: %w", err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	size := 64 << 10 // Linux's default, if pipe-max-size refuses more
	if got, err := unix.FcntlInt(uintptr(p[1]), unix.F_SETPIPE_SZ, spliceMax); err == nil {
		size = got
	}
	rc, err := src.SyscallConn()
	if err != nil {
		return err
	}
	wc, err := dst.SyscallConn()
	if err != nil {
		return err
	}
	const flags = unix.SPLICE_F_MOVE | unix.SPLICE_F_NONBLOCK
	for {
		var n int64
		var serr error
		if err := rc.Read(func(fd uintptr) bool {
			n, serr = unix.Splice(int(fd), nil, p[1], nil, size, flags)
			return serr != unix.EAGAIN
		}); err != nil {
			return err
		}
		if serr != nil {
			return fmt.Errorf("splice from %s: %w", src.RemoteAddr(), serr)
		}
		if n == 0 {
			return nil
		}
		answered.Store(true)
		for n > 0 { // drain the pipe: the next read from src needs it empty
			var m int64
			if err := wc.Write(func(fd uintptr) bool {
				m, serr = unix.Splice(p[0], nil, int(fd), nil, int(n), flags)
				return serr != unix.EAGAIN
			}); err != nil {
				return err
			}
			if serr != nil {
				return fmt.Errorf("splice to %s: %w", dst.RemoteAddr(), serr)
			}
			n -= m
		}
	}
}
