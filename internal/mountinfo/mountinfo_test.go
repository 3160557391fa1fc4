package mountinfo

import (
	"reflect"
	"testing"
)

func TestParse(t *testing.T) {
	table := `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw,errors=remount-ro
42 22 0:39 / /tmp/a\040b rw,nosuid,nodev,relatime - fuse.aifs /data/my\040set ro,user_id=0,group_id=0
43 42 0:40 / /tmp/a\040b rw,relatime - fuse.aifs /data/other rw,user_id=0
short line
`
	ms := Parse([]byte(table))
	want := []Mount{
		{ID: "22", Dev: "8:1", Point: "/", FSType: "ext4", Source: "/dev/vda1", SuperOptions: []string{"rw", "errors=remount-ro"}},
		{ID: "42", Dev: "0:39", Point: "/tmp/a b", FSType: "fuse.aifs", Source: "/data/my set", SuperOptions: []string{"ro", "user_id=0", "group_id=0"}},
		{ID: "43", Dev: "0:40", Point: "/tmp/a b", FSType: "fuse.aifs", Source: "/data/other", SuperOptions: []string{"rw", "user_id=0"}},
	}
	if !reflect.DeepEqual(ms, want) {
		t.Fatalf("Parse:\n got %+v\nwant %+v", ms, want)
	}
	if !ms[1].ReadOnly() || ms[2].ReadOnly() {
		t.Errorf("ReadOnly: %v %v, want true false", ms[1].ReadOnly(), ms[2].ReadOnly())
	}
	if got := Unescape(`a\134b\011c\x`); got != "a\\b\tc\\x" {
		t.Errorf("Unescape = %q", got)
	}
}

// TestAtRoot: this process's table has a root mount.
func TestAtRoot(t *testing.T) {
	if m, ok := At("/"); !ok || m.Point != "/" || m.Dev == "" {
		t.Errorf("At(/) = %+v, %v", m, ok)
	}
}
