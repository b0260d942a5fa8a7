package stages

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// goMod and goWork are the parts of `go mod edit -json` and
// `go work edit -json` output the checks read. Asking the go command to parse
// its own files keeps this module free of a parser dependency and always
// agrees with the toolchain about the syntax.
type goMod struct {
	Module  struct{ Path string }
	Require []struct{ Path, Version string }
	Replace []struct {
		Old struct{ Path string }
		New struct{ Path string }
	}
}

type goWork struct {
	Use []struct{ DiskPath string }
}

// readGoMod parses the go.mod file at path.
func readGoMod(path string) (*goMod, error) {
	var m goMod
	if err := goEditJSON(filepath.Dir(path), &m, "mod", "edit", "-json", filepath.Base(path)); err != nil {
		return nil, err
	}
	return &m, nil
}

// readGoWork parses the go.work file at path.
func readGoWork(path string) (*goWork, error) {
	var w goWork
	if err := goEditJSON(filepath.Dir(path), &w, "work", "edit", "-json", filepath.Base(path)); err != nil {
		return nil, err
	}
	return &w, nil
}

func goEditJSON(dir string, v any, args ...string) error {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(cmd.Environ(), "GOWORK=off", "GOFLAGS=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("go %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return json.Unmarshal(out, v)
}

// isDirectoryPath reports whether a replacement path names a directory
// rather than a module (the rule the go command applies: it starts with
// ./, ../ or /).
func isDirectoryPath(p string) bool {
	return strings.HasPrefix(p, "./") || strings.HasPrefix(p, "../") || strings.HasPrefix(p, "/") ||
		p == "." || p == ".."
}
