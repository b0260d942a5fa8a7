package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"
)

// This file checks what a reader does with the keyboard on the first page:
// the sidebar toggle (Space, then Enter), the theme toggle (Enter, then
// Space) and the search box ("/", typing, ↓), and that search finds every
// chapter by a word of its own, and that it matches words by their start
// only (a search for "fault" does not find a section whose only "fault" is
// inside "default").

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

// wordStartCheck finds up to 40 pairs of a word of the index (five letters
// or more) and a section where that word appears only inside a longer word,
// never at the start of one ("fault" in a section that says "default" but
// never "fault"), and asks the search for the word: that section must not
// be among everything it finds. A word starts after a character that is not
// a letter or digit, or at a lower-to-upper case change (devHead's "Head").
const wordStartCheck = `new Promise((resolve) => {
  window.softgpuSearch('', () => {
    const idx = window.softgpuSearchIndex;
    const vocab = new Set();
    for (const s of idx.sections) for (const w of ((s.t + ' ' + s.x).toLowerCase().match(/[a-z]{5,}/g) || [])) vocab.add(w);
    const startsWord = (text, w) => {
      const lower = text.toLowerCase();
      for (let at = lower.indexOf(w); at >= 0; at = lower.indexOf(w, at + 1)) {
        if (at === 0 || !/[A-Za-z0-9]/.test(text[at - 1]) || (/[a-z]/.test(text[at - 1]) && /[A-Z]/.test(text[at]))) return true;
      }
      return false;
    };
    const pairs = [], seen = new Set();
    idx.sections.forEach((s, i) => {
      const text = idx.pages[s.p].t + ' ' + s.t + ' ' + s.x;
      for (const m of text.matchAll(/[a-z]{7,}/g)) {
        const word = m[0];
        for (let k = 2; k + 5 <= word.length && pairs.length < 40; k++) {
          const inner = word.slice(k);
          const key = inner + ' ' + i;
          if (seen.has(key) || !vocab.has(inner)) continue;
          seen.add(key);
          if (!startsWord(text, inner)) pairs.push({ word: inner, inside: word, href: idx.pages[s.p].p + (s.i ? '#' + s.i : '') });
        }
      }
    });
    if (!pairs.length) { resolve([]); return; }
    const out = [];
    let left = pairs.length;
    pairs.forEach((p) => window.softgpuSearch(p.word, (hrefs) => {
      if (hrefs.includes(p.href)) out.push(p);
      if (--left === 0) resolve(out);
    }));
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

	// The theme toggle: Enter, then Space, each switches the theme.
	theme := func() (string, error) {
		raw, err := t.eval(ctx, `getComputedStyle(document.documentElement).colorScheme`)
		return string(raw), err
	}
	if _, err := t.eval(ctx, `document.querySelector('.theme-toggle').focus(), true`); err != nil {
		return nil, err
	}
	was, err := theme()
	if err != nil {
		return nil, err
	}
	for _, k := range []struct{ key, code, text string }{{"Enter", "Enter", "\r"}, {" ", "Space", " "}} {
		keyCode := 32
		if k.code == "Enter" {
			keyCode = 13
		}
		if err := t.press(ctx, k.key, k.code, keyCode, k.text); err != nil {
			return nil, err
		}
		now, err := theme()
		if err != nil {
			return nil, err
		}
		if now == was {
			problems = append(problems, fmt.Sprintf("%s: %s on the theme toggle left the theme %s", j, k.code, now))
		}
		was = now
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
	raw, err = t.eval(ctx, wordStartCheck)
	if err != nil {
		return nil, err
	}
	var inside []struct {
		Word   string `json:"word"`
		Inside string `json:"inside"`
		Href   string `json:"href"`
	}
	if err := json.Unmarshal(raw, &inside); err != nil {
		return nil, err
	}
	for _, f := range inside {
		problems = append(problems, fmt.Sprintf("%s: search for %q finds %s, whose only %q is inside %q: search must match the start of a word", j, f.Word, f.Href, f.Word, f.Inside))
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
