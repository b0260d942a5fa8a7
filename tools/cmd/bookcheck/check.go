package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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
	return t.evalWithin(ctx, callTimeout, expression)
}

// evalWithin is eval with its own time limit, for a check (axe) that takes
// longer than any command should.
func (t *tab) evalWithin(ctx context.Context, limit time.Duration, expression string) (json.RawMessage, error) {
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
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	if err := t.c.call(ctx, t.session, "Runtime.evaluate", map[string]any{"expression": expression, "awaitPromise": true, "returnByValue": true}, &r); err != nil {
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
  const out = { scrollWidth: de.scrollWidth, innerWidth: w, offenders: [], charts: [], brokenImages: [], phoneTables: [] };
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
  for (const svg of document.querySelectorAll('svg.chart, svg.sgt-timeline, svg.diagram')) {
    const r = svg.getBoundingClientRect();
    if (!r.width || !svg.viewBox || !svg.viewBox.baseVal || !svg.viewBox.baseVal.width) continue;
    const scale = r.width / svg.viewBox.baseVal.width;
    let min = Infinity, which = '';
    for (const t of svg.querySelectorAll('text')) {
      const px = parseFloat(getComputedStyle(t).fontSize) * scale;
      if (px < min) { min = px; which = t.textContent; }
    }
    const title = svg.querySelector('title');
    out.charts.push({ title: title ? title.textContent.slice(0, 100) : '', min: min, text: which, diagram: svg.classList.contains('diagram') });
  }
  // A phone: a table wider than its frame scrolls, so its label column
  // must stay put (sticky) and leave at least half the frame to the
  // numbers beside it; otherwise a reader sees labels and no numbers.
  if (w < 700) {
    for (const wrap of document.querySelectorAll('.table-wrap')) {
      if (wrap.scrollWidth <= wrap.clientWidth + 1) continue;
      const cell = wrap.querySelector('tbody tr > :first-child');
      if (!cell) continue;
      const fig = wrap.closest('figure'), cap = fig && fig.querySelector(':scope > figcaption');
      const name = cap ? cap.textContent.trim().replace(/\s+/g, ' ').slice(0, 90) : (wrap.getAttribute('aria-label') || 'a table');
      const sticky = getComputedStyle(cell).position === 'sticky', cw = cell.getBoundingClientRect().width;
      if (!sticky) out.phoneTables.push(name + ': scrolls sideways and its label column scrolls away with it');
      else if (cw > wrap.clientWidth / 2) out.phoneTables.push(name + ': its label column takes ' + Math.round(cw) + ' of ' + wrap.clientWidth + ' px');
    }
  }
  for (const img of document.images) {
    if (img.complete && img.naturalWidth === 0) out.brokenImages.push(img.getAttribute('src'));
  }
  return out;
})()`

// minDiagramText is the smallest text a diagram (book/diagrams, inlined)
// may draw, in CSS px once scaled to its column: issue 38 asks for 10 px
// at 390 px.
const minDiagramText = 10

type layout struct {
	ScrollWidth  int      `json:"scrollWidth"`
	InnerWidth   int      `json:"innerWidth"`
	Offenders    []string `json:"offenders"`
	BrokenImages []string `json:"brokenImages"`
	PhoneTables  []string `json:"phoneTables"`
	Charts       []struct {
		Title   string  `json:"title"`
		Min     float64 `json:"min"`
		Text    string  `json:"text"`
		Diagram bool    `json:"diagram"`
	} `json:"charts"`
}

// shotTurn lets one tab at a time capture a screenshot (see screenshot).
var shotTurn sync.Mutex

// maxShotHeight bounds a screenshot: print.html at phone width is tens of
// thousands of pixels tall.
const maxShotHeight = 16000

// visit loads one page, checks it and takes its screenshot; with -dark it
// then switches the page to the dark theme (in place, as the theme button
// does; loaded again when a screenshot is wanted) and checks it again.
func (t *tab) visit(ctx context.Context, j job) ([]pageResult, error) {
	l := newListener()
	if err := t.load(ctx, j, l); err != nil {
		return nil, err
	}
	light, err := t.check(ctx, j, l, true)
	if err != nil || !t.cfg.dark {
		return []pageResult{light}, err
	}
	dj := j
	dj.scheme = "dark"
	dl := newListener()
	if t.cfg.shots {
		// A screenshot needs a page drawn afresh, which a background tab
		// does not do after a change in place: load it again, dark.
		if err := t.load(ctx, dj, dl); err != nil {
			return nil, err
		}
	} else if _, err := t.eval(ctx, `document.documentElement.setAttribute('data-theme', 'dark'), new Promise((r) => setTimeout(() => r(true), 50))`); err != nil {
		return nil, err
	}
	dark, err := t.check(ctx, dj, dl, false)
	return []pageResult{light, dark}, err
}

// check checks the page as it is now drawn: its layout, its accessibility
// (all of it when full, else only what a theme changes: colour contrast),
// and takes its screenshot.
func (t *tab) check(ctx context.Context, j job, l *listener, full bool) (pageResult, error) {
	res := pageResult{job: j}
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
		kind, least := "chart", t.cfg.minText
		if c.Diagram {
			kind, least = "diagram", minDiagramText
		}
		if c.Min < least {
			l.add(fmt.Sprintf("%s %q draws text at %.1f px (%q), under %.1f px", kind, c.Title, c.Min, c.Text, least))
		}
	}
	for _, p := range lay.PhoneTables {
		l.add("table " + p)
	}
	for _, src := range lay.BrokenImages {
		l.add("image did not load: " + src)
	}
	a11y, err := t.a11yProblems(ctx, full)
	if err != nil {
		return res, err
	}
	for _, p := range a11y {
		l.add(p)
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
//
// Only the browser's front tab draws frames, and a capture waits for one:
// a tab left in the background can wait out the call's whole limit (seen
// once under load, TestInChromium). So the tabs take turns, each brought
// to the front for its capture.
func (t *tab) screenshot(ctx context.Context, j job) (string, error) {
	shotTurn.Lock()
	defer shotTurn.Unlock()
	if err := t.call(ctx, "Page.bringToFront", nil, nil); err != nil {
		return "", err
	}
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
