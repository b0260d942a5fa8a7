package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// job is one load of one page.
type job struct {
	page   string // site path, e.g. "stage0-mailbox.html"
	width  int
	scheme string // "light" or "dark"
	url    string
}

func (j job) String() string {
	s := fmt.Sprintf("%s at %d px", j.page, j.width)
	if j.scheme != "light" {
		s += ", " + j.scheme
	}
	return s
}

// shotName is the file a job's screenshot is written to.
func (j job) shotName() string {
	name := strings.ReplaceAll(strings.TrimSuffix(j.page, ".html"), "/", "__")
	name += fmt.Sprintf("-%d", j.width)
	if j.scheme != "light" {
		name += "-" + j.scheme
	}
	return name + ".png"
}

// pageResult is what one load found.
type pageResult struct {
	job      job
	problems []string
	shot     string // file name in the screenshot folder, "" when none
}

// tab is one browser tab and the events of its session.
type tab struct {
	c       *cdp
	session string
	events  chan event
	cfg     config
}

// call sends one command to the tab; no command may take longer than
// callTimeout, so a wedged page fails the run instead of hanging it.
func (t *tab) call(ctx context.Context, method string, params, result any) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	return t.c.call(ctx, t.session, method, params, result)
}

const callTimeout = 60 * time.Second

// listener collects a page's console errors and failed requests from its
// events.
type listener struct {
	urls     map[string]string // request id → URL
	problems []string
	seen     map[string]bool
}

func newListener() *listener { return &listener{urls: map[string]string{}, seen: map[string]bool{}} }

func (l *listener) add(p string) {
	if !l.seen[p] {
		l.seen[p] = true
		l.problems = append(l.problems, p)
	}
}

func (l *listener) handle(e event) {
	switch e.Method {
	case "Runtime.consoleAPICalled":
		var p struct {
			Type string `json:"type"`
			Args []struct {
				Value       any    `json:"value"`
				Description string `json:"description"`
			} `json:"args"`
		}
		if json.Unmarshal(e.Params, &p) == nil && (p.Type == "error" || p.Type == "assert") {
			var parts []string
			for _, a := range p.Args {
				if a.Description != "" {
					parts = append(parts, a.Description)
				} else {
					parts = append(parts, fmt.Sprint(a.Value))
				}
			}
			l.add("console " + p.Type + ": " + strings.Join(parts, " "))
		}
	case "Runtime.exceptionThrown":
		var p struct {
			Details struct {
				Text      string `json:"text"`
				Exception struct {
					Description string `json:"description"`
				} `json:"exception"`
			} `json:"exceptionDetails"`
		}
		if json.Unmarshal(e.Params, &p) == nil {
			l.add("uncaught exception: " + firstLine(p.Details.Text+" "+p.Details.Exception.Description))
		}
	case "Log.entryAdded":
		var p struct {
			Entry struct {
				Level string `json:"level"`
				Text  string `json:"text"`
				URL   string `json:"url"`
			} `json:"entry"`
		}
		if json.Unmarshal(e.Params, &p) == nil && p.Entry.Level == "error" {
			l.add("console error: " + p.Entry.Text + " " + p.Entry.URL)
		}
	case "Network.requestWillBeSent":
		var p struct {
			RequestID string `json:"requestId"`
			Request   struct {
				URL string `json:"url"`
			} `json:"request"`
		}
		if json.Unmarshal(e.Params, &p) == nil {
			l.urls[p.RequestID] = p.Request.URL
		}
	case "Network.loadingFailed":
		var p struct {
			RequestID string `json:"requestId"`
			ErrorText string `json:"errorText"`
			Canceled  bool   `json:"canceled"`
		}
		if json.Unmarshal(e.Params, &p) == nil && !p.Canceled {
			l.add("failed request: " + l.urls[p.RequestID] + ": " + p.ErrorText)
		}
	case "Network.responseReceived":
		var p struct {
			Response struct {
				URL    string `json:"url"`
				Status int    `json:"status"`
			} `json:"response"`
		}
		if json.Unmarshal(e.Params, &p) == nil && p.Response.Status >= 400 {
			l.add(fmt.Sprintf("failed request: %s: HTTP %d", p.Response.URL, p.Response.Status))
		}
	}
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// drain hands every queued event to l.
func (t *tab) drain(l *listener) {
	for {
		select {
		case e, ok := <-t.events:
			if !ok {
				return
			}
			if l != nil {
				l.handle(e)
			}
		default:
			return
		}
	}
}

// load opens j's page at its width and theme and waits until it has loaded
// and drawn, collecting events into l.
func (t *tab) load(ctx context.Context, j job, l *listener) error {
	t.drain(nil) // the last page's stragglers are not this page's
	height := 900
	if j.width >= 700 {
		height = 800
	}
	if err := t.call(ctx, "Emulation.setDeviceMetricsOverride", map[string]any{
		"width": j.width, "height": height, "deviceScaleFactor": 1, "mobile": j.width < 700,
	}, nil); err != nil {
		return err
	}
	if err := t.call(ctx, "Emulation.setEmulatedMedia", map[string]any{
		"features": []map[string]string{{"name": "prefers-color-scheme", "value": j.scheme}},
	}, nil); err != nil {
		return err
	}
	var nav struct {
		ErrorText string `json:"errorText"`
	}
	if err := t.call(ctx, "Page.navigate", map[string]any{"url": j.url}, &nav); err != nil {
		return err
	}
	if nav.ErrorText != "" {
		l.add("navigation failed: " + nav.ErrorText)
		return nil
	}
	timeout := time.After(30 * time.Second)
	for loaded := false; !loaded; {
		select {
		case e, ok := <-t.events:
			if !ok {
				return fmt.Errorf("the browser connection closed")
			}
			l.handle(e)
			loaded = e.Method == "Page.loadEventFired"
		case <-timeout:
			l.add("the page did not finish loading within 30 s")
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	// Fonts, then a moment for the layout to settle. (Not animation frames:
	// a tab in the background gets none.)
	_, err := t.eval(ctx, `document.fonts.ready.then(() => new Promise(r => setTimeout(() => r(true), 50)))`)
	return err
}

// eval runs expression in the page, awaiting a promise, and returns its
// value as JSON.
func (t *tab) eval(ctx context.Context, expression string) (json.RawMessage, error) {
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	if err := t.call(ctx, "Runtime.evaluate", map[string]any{"expression": expression, "awaitPromise": true, "returnByValue": true}, &r); err != nil {
		return nil, err
	}
	if r.ExceptionDetails != nil {
		return nil, fmt.Errorf("evaluating the check: %s %s", r.ExceptionDetails.Text, firstLine(r.ExceptionDetails.Exception.Description))
	}
	return r.Result.Value, nil
}

// layoutCheck measures the page: its width against the window's (WIDTH, the
// emulated width: a phone's browser widens innerWidth to fit a page that
// overflows, zooming out, so innerWidth alone would never notice), the
// elements that stick out, and the smallest chart text as drawn.
const layoutCheck = `(() => {
  const de = document.documentElement, w = WIDTH;
  const out = { scrollWidth: de.scrollWidth, innerWidth: w, offenders: [], charts: [], brokenImages: [] };
  const describe = (el) => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') + (el.className && typeof el.className === 'string' ? '.' + el.className.trim().split(/\s+/).join('.') : '');
  if (de.scrollWidth > w) {
    for (const el of document.querySelectorAll('body *')) {
      const r = el.getBoundingClientRect();
      if (r.width > 0 && r.right > w + 1) {
        let inScroller = false;
        for (let p = el.parentElement; p; p = p.parentElement) {
          const ox = getComputedStyle(p).overflowX;
          if (ox === 'auto' || ox === 'scroll' || ox === 'hidden') { inScroller = p.scrollWidth > p.clientWidth || ox === 'hidden'; if (inScroller) break; }
        }
        if (!inScroller) out.offenders.push(describe(el) + ' reaches ' + Math.round(r.right) + ' px');
        if (out.offenders.length >= 5) break;
      }
    }
  }
  for (const svg of document.querySelectorAll('svg.chart, svg.sgt-timeline')) {
    const r = svg.getBoundingClientRect();
    if (!r.width || !svg.viewBox || !svg.viewBox.baseVal || !svg.viewBox.baseVal.width) continue;
    const scale = r.width / svg.viewBox.baseVal.width;
    let min = Infinity, which = '';
    for (const t of svg.querySelectorAll('text')) {
      const px = parseFloat(getComputedStyle(t).fontSize) * scale;
      if (px < min) { min = px; which = t.textContent; }
    }
    const title = svg.querySelector('title');
    out.charts.push({ title: title ? title.textContent : '', min: min, text: which });
  }
  for (const img of document.images) {
    if (img.complete && img.naturalWidth === 0) out.brokenImages.push(img.getAttribute('src'));
  }
  return out;
})()`

type layout struct {
	ScrollWidth  int      `json:"scrollWidth"`
	InnerWidth   int      `json:"innerWidth"`
	Offenders    []string `json:"offenders"`
	BrokenImages []string `json:"brokenImages"`
	Charts       []struct {
		Title string  `json:"title"`
		Min   float64 `json:"min"`
		Text  string  `json:"text"`
	} `json:"charts"`
}

// maxShotHeight bounds a screenshot: print.html at phone width is tens of
// thousands of pixels tall.
const maxShotHeight = 16000

// visit loads one page, checks it and takes its screenshot.
func (t *tab) visit(ctx context.Context, j job) (pageResult, error) {
	res := pageResult{job: j}
	l := newListener()
	if err := t.load(ctx, j, l); err != nil {
		return res, err
	}
	raw, err := t.eval(ctx, strings.Replace(layoutCheck, "WIDTH", strconv.Itoa(j.width), 1))
	if err != nil {
		return res, err
	}
	var lay layout
	if err := json.Unmarshal(raw, &lay); err != nil {
		return res, err
	}
	if lay.ScrollWidth > lay.InnerWidth {
		p := fmt.Sprintf("pans sideways: the page is %d px wide in a %d px window", lay.ScrollWidth, lay.InnerWidth)
		if len(lay.Offenders) > 0 {
			p += " (" + strings.Join(lay.Offenders, "; ") + ")"
		}
		l.add(p)
	}
	for _, c := range lay.Charts {
		if c.Min < t.cfg.minText {
			l.add(fmt.Sprintf("chart %q draws text at %.1f px (%q), under %.1f px", c.Title, c.Min, c.Text, t.cfg.minText))
		}
	}
	for _, src := range lay.BrokenImages {
		l.add("image did not load: " + src)
	}
	if t.cfg.shots {
		name, err := t.screenshot(ctx, j)
		if err != nil {
			return res, err
		}
		res.shot = name
	}
	t.drain(l)
	res.problems = l.problems
	return res, nil
}

// screenshot writes the whole page (up to maxShotHeight) as a PNG.
func (t *tab) screenshot(ctx context.Context, j job) (string, error) {
	var metrics struct {
		Content struct {
			Width  float64 `json:"width"`
			Height float64 `json:"height"`
		} `json:"cssContentSize"`
	}
	if err := t.call(ctx, "Page.getLayoutMetrics", nil, &metrics); err != nil {
		return "", err
	}
	h := math.Min(math.Ceil(metrics.Content.Height), maxShotHeight)
	var shot struct {
		Data string `json:"data"`
	}
	if err := t.call(ctx, "Page.captureScreenshot", map[string]any{
		"format": "png", "captureBeyondViewport": true,
		"clip": map[string]any{"x": 0, "y": 0, "width": j.width, "height": h, "scale": 1},
	}, &shot); err != nil {
		return "", err
	}
	png, err := base64.StdEncoding.DecodeString(shot.Data)
	if err != nil {
		return "", err
	}
	name := j.shotName()
	return name, os.WriteFile(filepath.Join(t.cfg.out, name), png, 0o644)
}

// press sends one key to the focused element.
func (t *tab) press(ctx context.Context, key, code string, keyCode int, text string) error {
	for _, typ := range []string{"keyDown", "keyUp"} {
		p := map[string]any{"type": typ, "key": key, "code": code, "windowsVirtualKeyCode": keyCode}
		if typ == "keyDown" && text != "" {
			p["text"] = text
		}
		if err := t.call(ctx, "Input.dispatchKeyEvent", p, nil); err != nil {
			return err
		}
	}
	return nil
}

const sidebarShown = `(() => {
  const s = document.getElementById('sidebar'), cs = getComputedStyle(s), r = s.getBoundingClientRect();
  return cs.display !== 'none' && cs.visibility !== 'hidden' && r.width > 0 && r.right > 10;
})()`

// searchCheck picks, for every chapter, the word of at least seven letters
// that the fewest other chapters use, and asks the search for it.
const searchCheck = `new Promise((resolve) => {
  window.softgpuSearch('', () => {
    const idx = window.softgpuSearchIndex;
    const words = idx.pages.map(() => new Map());
    for (const s of idx.sections) {
      for (const w of ((s.t + ' ' + s.x).toLowerCase().match(/[a-z]{7,}/g) || [])) words[s.p].set(w, (words[s.p].get(w) || 0) + 1);
    }
    const df = new Map();
    words.forEach((m) => m.forEach((_, w) => df.set(w, (df.get(w) || 0) + 1)));
    const picks = words.map((m) => {
      let best = null;
      m.forEach((n, w) => { const d = df.get(w); if (!best || d < best.d || (d === best.d && (n > best.n || (n === best.n && w < best.w)))) best = { w, d, n }; });
      return best ? best.w : '';
    });
    const out = [];
    let left = picks.length;
    picks.forEach((w, i) => {
      const page = idx.pages[i].p;
      window.softgpuSearch(w, (hrefs) => {
        out.push({ page, word: w, found: w !== '' && hrefs.some((h) => h.split('#')[0] === page) });
        if (--left === 0) resolve(out);
      });
    });
  });
})`

// interact checks the sidebar toggle and the search box with the keyboard.
func (t *tab) interact(ctx context.Context, j job) ([]string, error) {
	l := newListener()
	if err := t.load(ctx, j, l); err != nil {
		return nil, err
	}
	var problems []string
	shown := func() (bool, error) {
		time.Sleep(300 * time.Millisecond) // the narrow sidebar slides in over 150 ms
		raw, err := t.eval(ctx, sidebarShown)
		if err != nil {
			return false, err
		}
		return string(raw) == "true", nil
	}
	before, err := shown()
	if err != nil {
		return nil, err
	}
	if _, err := t.eval(ctx, `document.getElementById('sidebar-toggle').focus(), true`); err != nil {
		return nil, err
	}
	for _, k := range []struct{ key, code, text string }{{" ", "Space", " "}, {"Enter", "Enter", "\r"}} {
		keyCode := 32
		if k.code == "Enter" {
			keyCode = 13
		}
		if err := t.press(ctx, k.key, k.code, keyCode, k.text); err != nil {
			return nil, err
		}
		after, err := shown()
		if err != nil {
			return nil, err
		}
		if after == before {
			problems = append(problems, fmt.Sprintf("%s: %s on the sidebar toggle left the sidebar %s", j, k.code, map[bool]string{true: "shown", false: "hidden"}[after]))
		}
		before = after
	}

	raw, err := t.eval(ctx, searchCheck)
	if err != nil {
		return nil, err
	}
	var found []struct {
		Page  string `json:"page"`
		Word  string `json:"word"`
		Found bool   `json:"found"`
	}
	if err := json.Unmarshal(raw, &found); err != nil {
		return nil, err
	}
	sort.Slice(found, func(a, b int) bool { return found[a].Page < found[b].Page })
	var typed string
	for _, f := range found {
		if !f.Found {
			problems = append(problems, fmt.Sprintf("%s: search for %q does not find %s", j, f.Word, f.Page))
		} else if typed == "" {
			typed = f.Word
		}
	}
	// The same through the box: "/" focuses it, typing lists results, ↓
	// moves to the first.
	if typed != "" {
		if _, err := t.eval(ctx, `document.activeElement && document.activeElement.blur(), true`); err != nil {
			return nil, err
		}
		if err := t.press(ctx, "/", "Slash", 191, "/"); err != nil {
			return nil, err
		}
		if err := t.call(ctx, "Input.insertText", map[string]any{"text": typed}, nil); err != nil {
			return nil, err
		}
		time.Sleep(500 * time.Millisecond)
		if err := t.press(ctx, "ArrowDown", "ArrowDown", 40, ""); err != nil {
			return nil, err
		}
		raw, err := t.eval(ctx, `(() => { const a = document.activeElement; return { results: document.querySelectorAll('#search-results a').length, focused: !!(a && a.closest('#search-results')) }; })()`)
		if err != nil {
			return nil, err
		}
		var box struct {
			Results int  `json:"results"`
			Focused bool `json:"focused"`
		}
		if err := json.Unmarshal(raw, &box); err != nil {
			return nil, err
		}
		if box.Results == 0 || !box.Focused {
			problems = append(problems, fmt.Sprintf("%s: typing %q after / listed %d results, and ↓ focused a result: %v", j, typed, box.Results, box.Focused))
		}
	}
	t.drain(l)
	for _, p := range l.problems {
		problems = append(problems, j.String()+": "+p)
	}
	return problems, nil
}

// report is every result, in job order.
type report struct {
	results      []pageResult
	interactions []string
	loads        int
}

func (r *report) failed() bool {
	for _, res := range r.results {
		if len(res.problems) > 0 {
			return true
		}
	}
	return len(r.interactions) > 0
}

func (r *report) String() string {
	var b strings.Builder
	bad := 0
	for _, res := range r.results {
		if len(res.problems) == 0 {
			continue
		}
		bad++
		fmt.Fprintf(&b, "FAIL %s\n", res.job)
		for _, p := range res.problems {
			fmt.Fprintf(&b, "\t%s\n", p)
		}
	}
	for _, p := range r.interactions {
		fmt.Fprintf(&b, "FAIL %s\n", p)
	}
	if bad == 0 && len(r.interactions) == 0 {
		fmt.Fprintf(&b, "ok: %d loads: no page pans sideways, logs an error, fails a request or draws chart text too small; the sidebar toggles from the keyboard and search finds every chapter\n", len(r.results))
	} else {
		fmt.Fprintf(&b, "%d of %d loads failed; %d interaction problems\n", bad, len(r.results), len(r.interactions))
	}
	return b.String()
}

// writeGallery writes index.html in the screenshot folder: every page's
// screenshots side by side, failures first.
func writeGallery(dir string, results []pageResult) error {
	byPage := map[string][]pageResult{}
	var pages []string
	failed := map[string]bool{}
	for _, r := range results {
		if _, ok := byPage[r.job.page]; !ok {
			pages = append(pages, r.job.page)
		}
		byPage[r.job.page] = append(byPage[r.job.page], r)
		if len(r.problems) > 0 {
			failed[r.job.page] = true
		}
	}
	sort.SliceStable(pages, func(i, j int) bool { return failed[pages[i]] && !failed[pages[j]] })
	var b strings.Builder
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>bookcheck screenshots</title>\n<style>body{font:14px system-ui,sans-serif;margin:1rem}section{margin:0 0 2rem}h2{font-size:1rem}.row{display:flex;gap:1rem;align-items:flex-start;overflow-x:auto}figure{margin:0}img{border:1px solid #ccc;max-height:600px}.fail{color:#b00020}</style></head><body>\n<h1>bookcheck screenshots</h1>\n")
	for _, p := range pages {
		class := ""
		if failed[p] {
			class = ` class="fail"`
		}
		fmt.Fprintf(&b, "<section><h2%s>%s</h2>\n", class, html.EscapeString(p))
		for _, r := range byPage[p] {
			for _, prob := range r.problems {
				fmt.Fprintf(&b, "<p class=\"fail\">%s: %s</p>\n", html.EscapeString(r.job.String()), html.EscapeString(prob))
			}
		}
		b.WriteString("<div class=\"row\">\n")
		for _, r := range byPage[p] {
			if r.shot != "" {
				fmt.Fprintf(&b, "<figure><a href=\"%s\"><img src=\"%s\" width=\"%d\" loading=\"lazy\" alt=\"%s\"></a><figcaption>%s</figcaption></figure>\n",
					html.EscapeString(r.shot), html.EscapeString(r.shot), min(r.job.width, 640)/2, html.EscapeString(r.job.String()), html.EscapeString(r.job.String()))
			}
		}
		b.WriteString("</div></section>\n")
	}
	b.WriteString("</body></html>\n")
	return os.WriteFile(filepath.Join(dir, "index.html"), []byte(b.String()), 0o644)
}
