package wrap

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestWords(t *testing.T) {
	tests := []struct {
		s     string
		width int
		want  []string
	}{
		{"", 10, nil},
		{"one two three", 7, []string{"one two", "three"}},
		{"one two three", 8, []string{"one two", "three"}},
		{"one two three", 13, []string{"one two three"}},
		{"a verylongword b", 5, []string{"a", "verylongword", "b"}},
		// Width counts runes: "5 µs" is four characters, not five bytes.
		{"5 µs 6 µs", 4, []string{"5 µs", "6 µs"}},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, Words(strings.Fields(tt.s), tt.width), "Words(Fields(%q), %d)", tt.s, tt.width)
	}
}

func TestWordsKeepsWhatTheCallerCallsAWord(t *testing.T) {
	words := []string{"run", "`go test work`", "then", "read"}
	assert.Equal(t, []string{"run", "`go test work`", "then read"}, Words(words, 10))
}
