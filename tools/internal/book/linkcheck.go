package book

import (
	"fmt"
	"html"
	"net/url"
	"path"
	"regexp"
	"sort"
	"strings"
)

// This file checks the rendered site the way a reader clicks through it:
// every internal href and src on every page must name a file of the site,
// and every #fragment an element id on the page it points into. External
// links (http:, https:, mailto:, //host) are not checked. A small scanner
// reads the tags; the pages are ours and well-formed, and a raw-HTML
// paragraph a chapter writes is tolerated as long as its tags are.

// BrokenLink is one link that does not resolve.
type BrokenLink struct {
	Page   string // page it is on, relative to the site root
	Href   string // as written in the page
	Reason string
}

func (l BrokenLink) String() string {
	return fmt.Sprintf("%s: broken link %q: %s", l.Page, l.Href, l.Reason)
}

// pageLinks is what the checker collects from one page.
type pageLinks struct {
	ids   map[string]int // id → how many elements carry it
	links []string       // href and src values, in page order
}

// CheckLinks returns every broken internal link and fragment in files, and
// every id defined twice on one page (a fragment to it would be ambiguous),
// sorted by page.
func CheckLinks(files map[string][]byte) []BrokenLink {
	pages := map[string]*pageLinks{}
	var names []string
	for name, data := range files {
		if strings.HasSuffix(name, ".html") {
			pages[name] = scanPage(data)
			names = append(names, name)
		}
	}
	sort.Strings(names)
	isDir := map[string]bool{}
	for name := range files {
		for d := path.Dir(name); d != "."; d = path.Dir(d) {
			isDir[d] = true
		}
	}

	var broken []BrokenLink
	for _, name := range names {
		pl := pages[name]
		var dups []string
		for id, n := range pl.ids {
			if n > 1 {
				dups = append(dups, id)
			}
		}
		sort.Strings(dups)
		for _, id := range dups {
			broken = append(broken, BrokenLink{Page: name, Href: "#" + id, Reason: fmt.Sprintf("id defined %d times on the page", pl.ids[id])})
		}
		for _, href := range pl.links {
			if reason := resolveLink(name, href, files, pages, isDir); reason != "" {
				broken = append(broken, BrokenLink{Page: name, Href: href, Reason: reason})
			}
		}
	}
	return broken
}

// resolveLink returns why href on page does not resolve, or "".
func resolveLink(page, href string, files map[string][]byte, pages map[string]*pageLinks, isDir map[string]bool) string {
	if href == "" || href == "#" || isExternal(href) {
		return ""
	}
	p, frag, _ := strings.Cut(href, "#")
	p, _, _ = strings.Cut(p, "?")
	target := page
	if p != "" {
		if strings.HasPrefix(p, "/") {
			return "absolute path: the site must also work opened from disk; use a relative link"
		}
		unescaped, err := url.PathUnescape(p)
		if err != nil {
			return "bad escape in path"
		}
		target = path.Join(path.Dir(page), unescaped)
		if target == ".." || strings.HasPrefix(target, "../") {
			return "points outside the site"
		}
		if isDir[target] || target == "." {
			target = strings.TrimPrefix(target+"/index.html", "./")
		}
		if _, ok := files[target]; !ok {
			if strings.HasSuffix(p, ".md") {
				return "no such page; a link to a .md file must name a chapter listed in SUMMARY.md"
			}
			return "no such file in the site"
		}
	}
	if frag == "" {
		return ""
	}
	tp, ok := pages[target]
	if !ok {
		return "" // a fragment into a non-HTML file (a JSON record) is not ours to check
	}
	if tp.ids[frag] > 0 {
		return ""
	}
	if f, err := url.PathUnescape(frag); err == nil && tp.ids[f] > 0 {
		return ""
	}
	// A span of a source page's lines, #L17-L31: both ends must exist.
	if m := lineRangeRE.FindStringSubmatch(frag); m != nil && tp.ids[m[1]] > 0 && tp.ids[m[2]] > 0 {
		return ""
	}
	if target == page {
		return fmt.Sprintf("no element with id %q on this page", frag)
	}
	return fmt.Sprintf("no element with id %q in %s", frag, target)
}

var lineRangeRE = regexp.MustCompile(`^(L[0-9]+)-(L[0-9]+)$`)

// scanPage collects ids and links from one HTML page.
func scanPage(doc []byte) *pageLinks {
	pl := &pageLinks{ids: map[string]int{}}
	scanTags(string(doc), func(tag string, attrs [][2]string) {
		for _, a := range attrs {
			switch {
			case a[0] == "id" && a[1] != "":
				pl.ids[a[1]]++
			case a[0] == "name" && tag == "a" && a[1] != "":
				pl.ids[a[1]]++
			case a[0] == "href" && (tag == "a" || tag == "link" || tag == "area"):
				pl.links = append(pl.links, a[1])
			case a[0] == "src" && (tag == "img" || tag == "script" || tag == "iframe" || tag == "source" || tag == "video" || tag == "audio"):
				pl.links = append(pl.links, a[1])
			}
		}
	})
	return pl
}

// scanTags calls fn for every start tag in doc with its lower-cased name and
// attributes (values unescaped), skipping comments, declarations, end tags
// and the contents of script, style and textarea.
func scanTags(doc string, fn func(tag string, attrs [][2]string)) {
	i := 0
	for {
		lt := strings.IndexByte(doc[i:], '<')
		if lt < 0 {
			return
		}
		i += lt
		rest := doc[i:]
		switch {
		case strings.HasPrefix(rest, "<!--"):
			end := strings.Index(rest[4:], "-->")
			if end < 0 {
				return
			}
			i += 4 + end + 3
			continue
		case strings.HasPrefix(rest, "<!"), strings.HasPrefix(rest, "<?"), strings.HasPrefix(rest, "</"):
			end := strings.IndexByte(rest, '>')
			if end < 0 {
				return
			}
			i += end + 1
			continue
		}
		// A start tag needs a letter after '<'; anything else is text.
		if len(rest) < 2 || !('a' <= rest[1]|0x20 && rest[1]|0x20 <= 'z') {
			i++
			continue
		}
		j := 1
		for j < len(rest) && isNameByte(rest[j]) {
			j++
		}
		tag := strings.ToLower(rest[1:j])
		var attrs [][2]string
		for {
			for j < len(rest) && isSpace(rest[j]) {
				j++
			}
			if j >= len(rest) {
				return
			}
			if rest[j] == '>' {
				j++
				break
			}
			if rest[j] == '/' {
				j++
				continue
			}
			k := j
			for j < len(rest) && !isSpace(rest[j]) && rest[j] != '=' && rest[j] != '>' && rest[j] != '/' {
				j++
			}
			name := strings.ToLower(rest[k:j])
			for j < len(rest) && isSpace(rest[j]) {
				j++
			}
			value := ""
			if j < len(rest) && rest[j] == '=' {
				j++
				for j < len(rest) && isSpace(rest[j]) {
					j++
				}
				if j < len(rest) && (rest[j] == '"' || rest[j] == '\'') {
					q := rest[j]
					end := strings.IndexByte(rest[j+1:], q)
					if end < 0 {
						return
					}
					value = rest[j+1 : j+1+end]
					j += end + 2
				} else {
					k := j
					for j < len(rest) && !isSpace(rest[j]) && rest[j] != '>' {
						j++
					}
					value = rest[k:j]
				}
			}
			if name != "" {
				attrs = append(attrs, [2]string{name, html.UnescapeString(value)})
			}
		}
		fn(tag, attrs)
		i += j
		if tag == "script" || tag == "style" || tag == "textarea" {
			end := strings.Index(strings.ToLower(doc[i:]), "</"+tag)
			if end < 0 {
				return
			}
			i += end
		}
	}
}

func isNameByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == ':'
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' }

// checkPrintIDs reports every id of a chapter's page that the print page
// holding the chapter lacks under the chapter's prefix. The print pages
// repeat each chapter with its ids prefixed by its print id (markdown.go),
// and a link into the chapter, chapter.md#x, is written there as #ID--x; so
// an id the print rendering leaves unprefixed, or drops, breaks every such
// link in print. CheckLinks sees that only once a chapter writes the link;
// this sees it as soon as the id exists. A diagram's ids are numbered per
// use (diagram.go), differ between the two renderings, and no link leads
// to them.
func checkPrintIDs(chapters []*chapter, files map[string][]byte) []BrokenLink {
	printIDs := map[string]map[string]int{} // print page → its ids
	holder := map[string]string{}           // an id on a print page → that page
	for v := 0; ; v++ {
		name := partPageName(printPage, v)
		data, ok := files[name]
		if !ok {
			break
		}
		printIDs[name] = scanPage(data).ids
		for id := range printIDs[name] {
			holder[id] = name
		}
	}
	var broken []BrokenLink
	for _, c := range chapters {
		page, ok := holder[c.PrintID]
		if !ok {
			page = printPage // the section itself is missing; every id below is reported
		}
		var ids []string
		for id := range scanPage(c.Body).ids {
			if !diagramIDRE.MatchString(id) {
				ids = append(ids, id)
			}
		}
		sort.Strings(ids)
		for _, id := range ids {
			want := c.PrintID + "--" + id
			if printIDs[page][want] == 0 {
				broken = append(broken, BrokenLink{Page: page, Href: "#" + want, Reason: fmt.Sprintf(
					"no element with this id, though %s has %q: a link to it from any chapter leads here in print", c.Page, id)})
			}
		}
	}
	return broken
}
