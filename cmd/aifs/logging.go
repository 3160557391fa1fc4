package main

import (
	"fmt"
	"io"
	stdlog "log"
	"os"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// logger builds the daemon's zap logger: console lines at --log-level, to --log-file if set,
// else to stderr in the foreground and nowhere for a daemon. The standard library's logger,
// which go-fuse writes to (--debug-fuse), is pointed at the same place. closeLog flushes the
// logger and closes the file.
func (c *mountConfig) logger(daemon bool) (*zap.Logger, func(), error) {
	level, err := zapcore.ParseLevel(c.logLevel)
	if err != nil {
		return nil, nil, fmt.Errorf("invalid log level %q", c.logLevel)
	}
	var out zapcore.WriteSyncer = os.Stderr
	if daemon {
		// A daemon's stderr is a pipe to `aifs mount` until it reports, then /dev/null.
		out = zapcore.AddSync(io.Discard)
	}
	out = zapcore.Lock(out)
	closeFile := func() {}
	if c.logFile != "" {
		f, err := os.OpenFile(c.logFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return nil, nil, fmt.Errorf("--log-file: %w", err)
		}
		out, closeFile = zapcore.Lock(f), func() { f.Close() }
	}
	stdlog.SetOutput(out)
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	log := zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(enc), out, level)).Named("aifs")
	return log, func() { log.Sync(); closeFile() }, nil
}
