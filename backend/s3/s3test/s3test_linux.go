package s3test

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel kill the server when the test process dies without running its
// cleanups (a panic, a test timeout, a kill), so no server outlives the test binary.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
