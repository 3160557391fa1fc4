//go:build !linux

package fs

import "errors"

func setReadAhead(mountpoint string, kb int) error {
	return errors.New("setting the read-ahead is supported on Linux only")
}
