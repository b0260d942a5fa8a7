package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"
)

// This file checks a page's accessibility on every load, two ways:
//
//   - axe-core (a tool nobody here wrote, pinned by .ci/a11y-tools; its
//     axe.min.js is given with -axe) runs its WCAG 2 A and AA rules
//     (tags wcag2a and wcag2aa) in the page as loaded, at its width and
//     theme: every violation is a problem naming the rule and the element.
//   - a11yCheck, below, asks what axe cannot: that headings skip no level,
//     that every image and diagram has a text alternative that says what it
//     shows (not just "diagram"), that every chart has a data table a screen
//     reader can reach, that every region that scrolls sideways can be
//     focused, is named and draws a focus ring, and that the sidebar
//     toggle, the theme toggle and the search box have names.
//
// The keyboard operation of those three controls is checked once per width
// by interact.go.

// loadAxe reads axe.min.js; a file that does not define axe is refused, so
// a wrong -axe fails at once rather than on every page.
func loadAxe(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("-axe: %w (install it with .ci/a11y-tools)", err)
	}
	if !strings.Contains(string(data), "axe") || !strings.Contains(string(data), "wcag2aa") {
		return "", fmt.Errorf("-axe: %s is not axe-core's axe.min.js", path)
	}
	return string(data), nil
}

// axeAll selects axe's WCAG 2 A and AA rules; axeContrast only those a
// theme changes.
const (
	axeAll      = `{ type: 'tag', values: ['wcag2a', 'wcag2aa'] }`
	axeContrast = `{ type: 'rule', values: ['color-contrast', 'link-in-text-block'] }`
)

// axeRun runs axe's WCAG 2 A and AA rules on the document and returns its
// violations, one entry per rule and element (at most 5 elements a rule).
const axeRun = `(async () => {
  if (!window.axe) return [{ id: 'axe-missing', help: 'axe-core did not load into the page', nodes: [] }];
  const r = await window.axe.run(document, { runOnly: ` + axeAll + `, resultTypes: ['violations'] });
  return r.violations.map((v) => ({ id: v.id, impact: v.impact || '', help: v.help, count: v.nodes.length,
    nodes: v.nodes.slice(0, 5).map((n) => ({ target: n.target.join(' '), html: n.html.slice(0, 160), summary: (n.failureSummary || '').replace(/\s+/g, ' ').slice(0, 300) })) }));
})()`

type axeViolation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"`
	Help   string `json:"help"`
	Count  int    `json:"count"`
	Nodes  []struct {
		Target  string `json:"target"`
		HTML    string `json:"html"`
		Summary string `json:"summary"`
	} `json:"nodes"`
}

// axeProblems turns violations into problem lines: "axe RULE (impact):
// help: ELEMENT: why", one line per element.
func axeProblems(raw json.RawMessage) ([]string, error) {
	var vs []axeViolation
	if err := json.Unmarshal(raw, &vs); err != nil {
		return nil, fmt.Errorf("reading axe's answer: %w", err)
	}
	var out []string
	for _, v := range vs {
		head := "axe " + v.ID
		if v.Impact != "" {
			head += " (" + v.Impact + ")"
		}
		head += ": " + v.Help
		if len(v.Nodes) == 0 {
			out = append(out, head)
			continue
		}
		for _, n := range v.Nodes {
			out = append(out, fmt.Sprintf("%s: %s: %s", head, n.Target, n.Summary))
		}
		if v.Count > len(v.Nodes) {
			out = append(out, fmt.Sprintf("%s: and %d more elements", head, v.Count-len(v.Nodes)))
		}
	}
	return out, nil
}

// a11yCheck returns the page's problems axe does not look for, as strings
// naming the element.
const a11yCheck = `(() => {
  const out = [];
  const describe = (el) => {
    let s = el.tagName.toLowerCase() + (el.id ? '#' + el.id : '');
    if (el.classList && el.classList.length) s += '.' + [...el.classList].join('.');
    return s;
  };
  const hidden = (el) => !!el.closest('[aria-hidden="true"]');
  const nameOf = (el) => {
    const by = el.getAttribute('aria-labelledby');
    if (by) return by.split(/\s+/).map((id) => { const t = document.getElementById(id); return t ? t.textContent : ''; }).join(' ').trim();
    const l = el.getAttribute('aria-label');
    if (l) return l.trim();
    if (el.tagName === 'IMG') return (el.getAttribute('alt') || '').trim();
    if (el.labels && el.labels.length) return [...el.labels].map((x) => x.textContent).join(' ').trim();
    if (el.tagName === 'svg' || el.tagName === 'SVG') { const t = el.querySelector(':scope > title'); return t ? t.textContent.trim() : ''; }
    return (el.getAttribute('title') || '').trim();
  };
  // A text alternative says what is shown: a few words, and not only a
  // generic noun.
  const generic = /^(diagram|chart|figure|image|picture|graph|svg|img|icon|timeline|plot)s?\.?$/i;
  const sayful = (s) => s.length >= 12 && !generic.test(s) && s.split(/\s+/).length >= 3;

  // Headings: the first is h1; none is more than one level below the last.
  let last = 0;
  for (const h of document.querySelectorAll('h1, h2, h3, h4, h5, h6')) {
    if (hidden(h)) continue;
    const n = +h.tagName[1];
    if (n > last + 1) out.push('heading ' + describe(h) + ' "' + h.textContent.trim().slice(0, 60) + '" is h' + n + ' after ' + (last ? 'h' + last : 'no heading') + ': a level is skipped');
    last = n;
  }
  // Images and diagrams.
  for (const img of document.images) {
    if (hidden(img) || img.getAttribute('alt') === '' && img.getAttribute('role') === 'presentation') continue;
    const n = nameOf(img);
    if (!sayful(n)) out.push('image ' + img.getAttribute('src') + ' has the text alternative "' + n + '", which does not say what it shows');
  }
  for (const svg of document.querySelectorAll('svg')) {
    if (hidden(svg) || (svg.parentElement && svg.parentElement.closest('svg'))) continue;
    if (svg.getAttribute('role') !== 'img') { out.push('svg ' + describe(svg) + ' is neither role="img" nor aria-hidden'); continue; }
    const n = nameOf(svg);
    if (!sayful(n)) out.push('svg ' + describe(svg) + ' has the text alternative "' + n + '", which does not say what it shows');
  }
  // Charts: a data table a screen reader reaches (in the same figure).
  for (const svg of document.querySelectorAll('svg.chart')) {
    const fig = svg.closest('figure');
    const t = fig && fig.querySelector('table');
    if (!t || hidden(t)) out.push('chart "' + nameOf(svg).slice(0, 60) + '" has no data table in its figure');
  }
  // Regions that scroll sideways: focusable, named, with a focus ring.
  for (const el of document.querySelectorAll('body *')) {
    if (el.scrollWidth <= el.clientWidth + 1 || hidden(el)) continue;
    const ox = getComputedStyle(el).overflowX;
    if (ox !== 'auto' && ox !== 'scroll') continue;
    if (el.tabIndex < 0 || !el.hasAttribute('tabindex')) { out.push('scrolling region ' + describe(el) + ' cannot be focused from the keyboard (no tabindex="0")'); continue; }
    if (!el.getAttribute('aria-label') && !el.getAttribute('aria-labelledby')) out.push('scrolling region ' + describe(el) + ' has no name (aria-label)');
    else if (!el.getAttribute('role')) out.push('scrolling region ' + describe(el) + ' is named but has no role (an aria-label on a plain element is not read)');
  }
  // The controls every page has.
  for (const [sel, what] of [['#sidebar-toggle', 'sidebar toggle'], ['.theme-toggle', 'theme toggle'], ['#search-input', 'search box']]) {
    const el = document.querySelector(sel);
    if (!el) continue;
    if (hidden(el)) out.push('the ' + what + ' (' + sel + ') is hidden from screen readers');
    else if (!nameOf(el)) out.push('the ' + what + ' (' + sel + ') has no accessible name');
  }
  return out;
})()`

// focusRingCheck focuses each scrolling region in turn and reports those
// drawn without an outline or box-shadow while they have focus.
const focusRingCheck = `(() => {
  const out = [];
  let n = 0;
  for (const el of document.querySelectorAll('[tabindex="0"]')) {
    // One inside a folded <details> is not drawn until unfolded.
    if (el.scrollWidth <= el.clientWidth + 1 || !el.checkVisibility()) continue;
    if (++n > 20) break;
    el.focus({ preventScroll: true });
    const cs = getComputedStyle(el);
    const ring = (cs.outlineStyle !== 'none' && parseFloat(cs.outlineWidth) > 0) || (cs.boxShadow && cs.boxShadow !== 'none');
    if (document.activeElement !== el || !ring) out.push('scrolling region ' + el.tagName.toLowerCase() + (el.className ? '.' + String(el.className).trim().split(/\s+/).join('.') : '') + ' draws no focus ring when focused from the keyboard');
    el.blur();
  }
  return out;
})()`

// axeTimeout bounds one page's axe run: its colour-contrast rule walks
// every text node, and a chapter has tens of thousands in its listings.
const axeTimeout = 5 * time.Minute

// a11yProblems runs axe (when loaded) and the page's own checks.
func (t *tab) a11yProblems(ctx context.Context, full bool) ([]string, error) {
	var out []string
	if t.cfg.axe != "" {
		run := axeRun
		if !full {
			run = strings.Replace(axeRun, axeAll, axeContrast, 1)
		}
		raw, err := t.evalWithin(ctx, axeTimeout, run)
		if err != nil {
			return nil, fmt.Errorf("running axe: %w", err)
		}
		ps, err := axeProblems(raw)
		if err != nil {
			return nil, err
		}
		out = append(out, ps...)
	}
	if !full {
		return out, nil
	}
	for _, check := range []string{a11yCheck, focusRingCheck} {
		raw, err := t.eval(ctx, check)
		if err != nil {
			return nil, err
		}
		var ps []string
		if err := json.Unmarshal(raw, &ps); err != nil {
			return nil, err
		}
		out = append(out, ps...)
	}
	return out, nil
}

// prepare readies a tab for the accessibility checks: its pages act as if
// focused (of several headless tabs only one has the browser's focus, and
// :focus styles match only in a focused page), and every page it opens from
// now on loads axe first.
func (t *tab) prepare(ctx context.Context) error {
	if err := t.call(ctx, "Emulation.setFocusEmulationEnabled", map[string]any{"enabled": true}, nil); err != nil {
		return err
	}
	if t.cfg.axe == "" {
		return nil
	}
	return t.call(ctx, "Page.addScriptToEvaluateOnNewDocument", map[string]any{"source": t.cfg.axe}, nil)
}
