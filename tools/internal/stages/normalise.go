package stages

import "strings"

// Module path normalisation. Two stages differ in their module path on every
// import line and in go.mod; replacing each stage's own path with a
// placeholder before diffing leaves only the mechanism in the diff. The same
// renaming, from one real path to another, is how `stages new` makes a copy
// and how `stages forward` carries a patch to a later stage.

// Placeholder is the module path both sides of a normalised diff use.
const Placeholder = ModulePrefix + "STAGE"

// Rename replaces the module path from with to wherever it appears as a
// whole path element: "softgpu/stage1-ring" and "softgpu/stage1-ring/abi"
// are renamed, "softgpu/stage1-ringx" is not. Text that only mentions a
// stage's directory name without the prefix ("see stage1-ring") is left
// alone: it is prose, not a module path.
func Rename(text, from, to string) string {
	if from == to || !strings.Contains(text, from) {
		return text
	}
	var b strings.Builder
	for {
		i := strings.Index(text, from)
		if i < 0 {
			b.WriteString(text)
			return b.String()
		}
		end := i + len(from)
		b.WriteString(text[:i])
		if end < len(text) && isPathChar(text[end]) || i > 0 && isPathChar(text[i-1]) {
			b.WriteString(from) // part of a longer name
		} else {
			b.WriteString(to)
		}
		text = text[end:]
	}
}

// Normalise replaces the module path of the stage in dir with Placeholder.
func Normalise(text, dir string) string {
	return Rename(text, ModulePath(dir), Placeholder)
}

// isPathChar reports whether c can continue a module path element.
func isPathChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}
