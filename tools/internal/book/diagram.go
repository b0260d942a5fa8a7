package book

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// This file implements {{#diagram NAME [caption="..."]}}: the SVG file
// book/diagrams/NAME.svg, inlined in the page so that it takes the page's
// colours (currentColor and the d-* classes of style.css follow dark mode,
// which an <img> could not). The file must be well-formed XML with an <svg>
// root; its XML declaration and doctype are dropped, and its ids (and the
// url(#id) and href="#id" that use them) are prefixed per use, so that two
// diagrams in print.html never share an id. A missing or malformed file
// fails the build.

var (
	diagramNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	svgIDRE       = regexp.MustCompile(`\bid="([^"]+)"`)
	svgRefRE      = regexp.MustCompile(`(url\(#|href="#)([^)"]+)`)
	svgRootRE     = regexp.MustCompile(`<svg\b`)
	svgClassRE    = regexp.MustCompile(`^<svg\b[^>]*?\bclass="`)
)

// diagramIDPrefix is what the n-th diagram inlined puts before its ids.
// They are the SVG's own plumbing (markers, patterns), not places to link
// to; diagramIDRE recognises them.
func diagramIDPrefix(n int) string { return "dg" + strconv.Itoa(n) + "-" }

var diagramIDRE = regexp.MustCompile(`^dg[0-9]+-`)

// diagramHTML renders {{#diagram NAME [caption=]}}.
func (b *builder) diagramHTML(d directive) (string, error) {
	if err := d.allowKeys("caption"); err != nil {
		return "", err
	}
	if len(d.Positional) != 1 || !diagramNameRE.MatchString(d.Positional[0]) {
		return "", d.errorf(`want {{#diagram NAME caption="..."}}, NAME the file book/diagrams/NAME.svg without .svg`)
	}
	name := d.Positional[0]
	dir := filepath.Join(b.cfg.BookDir, "diagrams")
	p := filepath.Join(dir, name+".svg")
	if _, err := insideRoot(b.cfg.BookDir, p); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", d.errorf("no diagram %s: %s does not exist (diagrams: %s)", name, b.display(p), listDiagrams(dir))
		}
		return "", d.errorf("%v", err)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return "", d.errorf("%v", err)
	}
	b.diagrams++
	svg, err := inlineSVG(data, diagramIDPrefix(b.diagrams))
	if err != nil {
		return "", d.errorf("%s: %v", b.display(p), err)
	}
	if w := diagramMinWidth(data); w > 0 {
		svg = strings.Replace(svg, "<svg", fmt.Sprintf(`<svg style="min-width: %dpx"`, w), 1)
	}
	var out strings.Builder
	out.WriteString(`<figure class="diagram">` + "\n" + scrollRegion("diagram-wrap", "Diagram (scrolls sideways on a narrow screen)") + svg + "</div>\n")
	if c := d.arg("caption", ""); c != "" {
		out.WriteString("<figcaption>" + escapeHTML(c) + "</figcaption>\n")
	}
	out.WriteString("</figure>")
	return out.String(), nil
}

// minDiagramText is the smallest text a diagram may draw, in CSS px: issue
// 38 asks for 10 px at a phone's 390 px (bookcheck checks it as drawn).
const minDiagramText = 10

var (
	viewBoxWidthRE = regexp.MustCompile(`viewBox="[-0-9.]+[ ,]+[-0-9.]+[ ,]+([0-9.]+)`)
	fontSizeRE     = regexp.MustCompile(`font-size="([0-9.]+)"`)
)

// diagramMinWidth is the narrowest a diagram may be drawn, in CSS px, for
// its smallest text to stay minDiagramText: on a narrower column its frame
// scrolls sideways instead of shrinking it further. 0 when the SVG gives no
// viewBox or no font size.
func diagramMinWidth(svg []byte) int {
	m := viewBoxWidthRE.FindSubmatch(svg)
	if m == nil {
		return 0
	}
	width, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil || width <= 0 {
		return 0
	}
	least := 0.0
	for _, f := range fontSizeRE.FindAllSubmatch(svg, -1) {
		if v, err := strconv.ParseFloat(string(f[1]), 64); err == nil && v > 0 && (least == 0 || v < least) {
			least = v
		}
	}
	if least == 0 {
		return 0
	}
	return int(math.Ceil(width * minDiagramText / least))
}

func listDiagrams(dir string) string {
	paths, _ := filepath.Glob(filepath.Join(dir, "*.svg"))
	var names []string
	for _, p := range paths {
		names = append(names, strings.TrimSuffix(filepath.Base(p), ".svg"))
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// inlineSVG checks that data is one well-formed <svg> element and returns it
// ready to inline: prolog dropped, ids prefixed, class "diagram" added.
func inlineSVG(data []byte, idPrefix string) (string, error) {
	dec := xml.NewDecoder(strings.NewReader(string(data)))
	depth, roots := 0, 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("not well-formed XML: %v", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if depth == 0 {
				roots++
				if t.Name.Local != "svg" {
					return "", fmt.Errorf("the root element is <%s>; want <svg>", t.Name.Local)
				}
			}
			depth++
		case xml.EndElement:
			depth--
		case xml.ProcInst:
			if depth > 0 {
				return "", fmt.Errorf("a processing instruction inside <svg>")
			}
		}
	}
	if roots != 1 {
		return "", fmt.Errorf("want exactly one <svg> element, found %d", roots)
	}
	s := string(data)
	start := svgRootRE.FindStringIndex(s)
	end := strings.LastIndex(s, "</svg>")
	if start == nil || end < 0 {
		return "", fmt.Errorf("no <svg>…</svg> element")
	}
	s = s[start[0] : end+len("</svg>")]
	if strings.Contains(s, "<script") {
		return "", fmt.Errorf("a diagram may not carry a <script>")
	}
	s = svgIDRE.ReplaceAllString(s, `id="`+idPrefix+`$1"`)
	s = svgRefRE.ReplaceAllString(s, "${1}"+idPrefix+"$2")
	if m := svgClassRE.FindStringIndex(s); m != nil {
		s = s[:m[1]] + "diagram " + s[m[1]:]
	} else {
		s = `<svg class="diagram"` + s[len("<svg"):]
	}
	return namedImage(s)
}
