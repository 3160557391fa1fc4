// Package aifs holds what the Go binary and the Python package share: the release version, read
// from python/aifs/VERSION, the one place it is written (pip reads the same file; README,
// "Python package").
package aifs

import (
	_ "embed"
	"strings"
)

//go:embed python/aifs/VERSION
var versionFile string

// Version is the release of this build, as in python/aifs/VERSION.
var Version = strings.TrimSpace(versionFile)
