module github.com/aifs/aifs

go 1.26

require (
	github.com/hanwen/go-fuse/v2 v2.12.1
	go.uber.org/zap v1.28.0
)

require (
	go.uber.org/multierr v1.10.0 // indirect
	golang.org/x/sys v0.28.0 // indirect
)
