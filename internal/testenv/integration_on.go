//go:build integration

package testenv

const integration = true
