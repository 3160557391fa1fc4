// Package testenv tells tests whether they may use what only the CI machines are sure to have:
// root (to mount ext4, XFS, ramfs and tmpfs, loop devices, memory cgroups), FUSE (/dev/fuse,
// fusermount3), S3 servers (versitygw, MinIO), tools such as bsdtar, and /usr/bin/python3 with
// PyTorch. Those tests run in a build with -tags integration, as scripts/test.sh (and so CI)
// builds them, and there they fail, never skip, when what they need is missing. Without the
// tag, on a newcomer's machine, `go test ./...` skips them, each with one line saying what it
// needs. The integration package, which mounts the aifs binary, is built only with the tag.
package testenv

import "testing"

// Integration reports whether the tests were built with -tags integration.
const Integration = integration

// Need skips t with one line saying that it needs what, unless the tests were built with
// -tags integration; then it returns, and the test fails if what it needs is missing.
func Need(t testing.TB, what string) {
	t.Helper()
	if !Integration {
		t.Skipf("needs %s: runs with -tags integration (scripts/test.sh)", what)
	}
}
