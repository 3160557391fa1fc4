package main

import (
	"os"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/aifs/aifs/fs"
)

// TestHandUpFill: a daemon hands the keeper its FUSE connection and a Filler of 600 descriptors
// (more than one message holds): the keeper gets the connection with its plane, control path
// and INIT bytes, the group first and then every copy, in order, each the file sent.
func TestHandUpFill(t *testing.T) {
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(keeperEnv, strconv.Itoa(sp[1]))
	conn, err := os.Open("/dev/null")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	dir := t.TempDir()
	var fill []int
	var inos []uint64
	for i := range 600 {
		f, err := os.Create(dir + "/f" + strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var st unix.Stat_t
		unix.Fstat(int(f.Fd()), &st)
		fill, inos = append(fill, int(f.Fd())), append(inos, st.Ino)
	}
	got := make(chan handed, 1)
	go func() { got <- receiveConn(os.NewFile(uintptr(sp[0]), "keeper")) }()
	if err := handUp(&fs.Conn{File: conn, Init: []byte("INIT\nbytes")}, dataKernel, "/run/aifs/0:99", fill); err != nil {
		t.Fatal(err)
	}
	h := <-got
	if h.conn == nil || h.plane != dataKernel || h.fuseAt != "/run/aifs/0:99" || string(h.conn.Init) != "INIT\nbytes" {
		t.Fatalf("handed %+v, want the connection of plane %s at /run/aifs/0:99 with its INIT", h, dataKernel)
	}
	if h.fill == nil || len(h.fill.copies) != len(fill)-1 {
		t.Fatalf("the keeper got %+v, want the group and %d copies", h.fill, len(fill)-1)
	}
	for i, f := range append([]*os.File{h.fill.fan}, h.fill.copies...) {
		var st unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &st); err != nil || st.Ino != inos[i] {
			t.Fatalf("descriptor %d received is inode %d (%v), want %d", i, st.Ino, err, inos[i])
		}
		f.Close()
	}
}
