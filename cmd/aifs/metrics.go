package main

import (
	"net"
	"strings"
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
