//go:build !linux

package cli

import "syscall"

func followGoRun() {}

func setDeathSignal(*syscall.SysProcAttr) {}
