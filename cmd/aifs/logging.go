package main

import (
	"fmt"
	"os"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// logger builds the daemon's zap logger: console lines at --log-level, to --log-file if set,
// else to stderr. closeLog flushes it.
func (c *mountConfig) logger() (*zap.Logger, func(), error) {
	level, err := zapcore.ParseLevel(c.logLevel)
	if err != nil {
		return nil, nil, fmt.Errorf("invalid log level %q", c.logLevel)
	}
	out := zapcore.Lock(os.Stderr)
	closeFile := func() {}
	if c.logFile != "" {
		f, err := os.OpenFile(c.logFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return nil, nil, fmt.Errorf("--log-file: %w", err)
		}
		out, closeFile = zapcore.Lock(f), func() { f.Close() }
	}
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	log := zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(enc), out, level)).Named("aifs")
	return log, func() { log.Sync(); closeFile() }, nil
}
