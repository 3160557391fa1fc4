//go:build !linux

package fs

import (
	"errors"
	"os"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// Conn is a FUSE connection handed from daemon to daemon, on Linux only (conn_linux.go).
type Conn struct {
	File *os.File
	Init []byte
}

var errNoHandover = errors.New("handing a FUSE connection over needs Linux")

func mountConn(string, string, []string, bool) (*Conn, error)              { return nil, errNoHandover }
func serveConn(*FS, *Conn, *fuse.MountOptions, bool) (*fuse.Server, error) { return nil, errNoHandover }

// CanResend is false: see conn_linux.go.
func (c *Conn) CanResend() bool { return false }

// Resend fails: see conn_linux.go.
func (c *Conn) Resend() error { return errNoHandover }
