package book

import (
	"bytes"
	"strings"

	"github.com/alecthomas/chroma/v2"
	chromahtml "github.com/alecthomas/chroma/v2/formatters/html"
	"github.com/alecthomas/chroma/v2/lexers"
	"github.com/alecthomas/chroma/v2/styles"
)

// This file highlights code with chroma, writing CSS classes rather than
// inline styles; static/chroma.css, generated from the same style, colours
// them. The book uses go, diff, sh, console, json and text fences; any other
// language chroma knows works too, and an unknown one is shown plain.

// chromaStyle is the light theme the stylesheet is generated from.
const chromaStyle = "github"

type highlighter struct {
	formatter *chromahtml.Formatter
	style     *chroma.Style
}

func newHighlighter() *highlighter {
	return &highlighter{
		formatter: chromahtml.New(chromahtml.WithClasses(true), chromahtml.ClassPrefix("")),
		style:     styles.Get(chromaStyle),
	}
}

// css returns the stylesheet for the highlighter's classes.
func (h *highlighter) css() []byte {
	var b bytes.Buffer
	if err := h.formatter.WriteCSS(&b, h.style); err != nil {
		panic("book: chroma WriteCSS: " + err.Error()) // writes to memory: cannot fail
	}
	return b.Bytes()
}

// highlight returns code as a <pre class="chroma"> block.
func (h *highlighter) highlight(code, lang string) string {
	lang = strings.ToLower(strings.TrimSpace(lang))
	var lexer chroma.Lexer
	switch lang {
	case "", "text", "txt", "plain", "output":
		lexer = nil
	default:
		lexer = lexers.Get(lang)
	}
	if lexer == nil {
		return `<pre class="chroma"><code>` + escapeHTML(code) + "</code></pre>\n"
	}
	lexer = chroma.Coalesce(lexer)
	it, err := lexer.Tokenise(nil, code)
	if err != nil {
		return `<pre class="chroma"><code>` + escapeHTML(code) + "</code></pre>\n"
	}
	var b bytes.Buffer
	if err := h.formatter.Format(&b, h.style, it); err != nil {
		return `<pre class="chroma"><code>` + escapeHTML(code) + "</code></pre>\n"
	}
	return b.String() + "\n"
}
