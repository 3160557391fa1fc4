//go:build !integration

package integration

import (
	"testing"

	"github.com/aifs/aifs/internal/testenv"
)

// The package's tests build the aifs binary and mount it; they are built only with -tags
// integration (scripts/test.sh), and without it this one test says what they need.
func TestIntegration(t *testing.T) {
	testenv.Need(t, "root, FUSE (/dev/fuse, fusermount3), memory cgroups, S3 servers (versitygw, MinIO) and /usr/bin/python3 with torch and torchvision")
}
