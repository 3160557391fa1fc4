//go:build !integration

package testenv

const integration = false
