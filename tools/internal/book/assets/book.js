// softgpu book: what a static page cannot do alone. Everything reads without
// it. It adds ←/→ between chapters; Enter and Escape on the sidebar toggle;
// the theme button; search over an index the book tool wrote
// (search-index.js, loaded on first use); a copy button on every code block
// and record command; the span of lines a source page was opened at; opens
// the folded diff a link points into; keeps the current chapter visible in
// the sidebar and marks the section being read in "On this page".
(function () {
  'use strict';

  var root = document.body.getAttribute('data-root') || '';
  var toggle = document.getElementById('sidebar-toggle');
  var narrow = window.matchMedia('(max-width: 899px)');

  function typing(t) {
    return t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName) && t.type !== 'checkbox');
  }

  // Is the sidebar on screen? Checked hides it when wide, shows it when narrow.
  function sidebarShown() {
    return narrow.matches ? toggle.checked : !toggle.checked;
  }
  function showSidebar(show) {
    toggle.checked = narrow.matches ? show : !show;
  }

  document.addEventListener('keydown', function (e) {
    if (e.defaultPrevented || e.altKey || e.ctrlKey || e.metaKey) return;
    // Enter toggles the sidebar from its (focusable) checkbox, as Space does.
    if (e.key === 'Enter' && e.target === toggle) {
      e.preventDefault();
      toggle.checked = !toggle.checked;
      return;
    }
    // Escape closes the sidebar where it covers the page.
    if (e.key === 'Escape' && narrow.matches && toggle.checked) {
      toggle.checked = false;
      toggle.focus();
      return;
    }
    if (typing(e.target) || e.shiftKey) return;
    // "/" goes to the search box, opening the sidebar if it is hidden.
    if (e.key === '/' && searchInput) {
      e.preventDefault();
      if (!sidebarShown()) showSidebar(true);
      searchInput.focus();
      return;
    }
    // ← and → follow the previous and next links, as in mdBook.
    var rel = e.key === 'ArrowLeft' ? 'prev' : e.key === 'ArrowRight' ? 'next' : '';
    if (!rel) return;
    var a = document.querySelector('.chapter-nav a[rel="' + rel + '"]');
    if (a) {
      e.preventDefault();
      window.location.href = a.href;
    }
  });

  // The theme: the reader's preference unless the button pinned one.
  var themeButton = document.querySelector('.theme-toggle');
  var prefersDark = window.matchMedia('(prefers-color-scheme: dark)');
  function currentTheme() {
    var t = document.documentElement.getAttribute('data-theme');
    return t || (prefersDark.matches ? 'dark' : 'light');
  }
  function labelThemeButton() {
    if (!themeButton) return;
    var next = currentTheme() === 'dark' ? 'light' : 'dark';
    themeButton.setAttribute('aria-label', 'Switch to the ' + next + ' theme');
    themeButton.title = 'Switch to the ' + next + ' theme';
  }
  if (themeButton) {
    labelThemeButton();
    themeButton.addEventListener('click', function () {
      var next = currentTheme() === 'dark' ? 'light' : 'dark';
      document.documentElement.setAttribute('data-theme', next);
      try { localStorage.setItem('softgpu-book-theme', next); } catch (err) { /* storage refused: the choice lasts this page */ }
      labelThemeButton();
    });
    if (prefersDark.addEventListener) prefersDark.addEventListener('change', labelThemeButton);
  }

  // Copy buttons. A listing's line numbers are not text (CSS draws them),
  // but the copy is built from the code spans to be sure of it.
  function codeText(pre) {
    if (!pre.classList.contains('listing')) return pre.textContent;
    var lines = [];
    pre.querySelectorAll('.line').forEach(function (l) {
      if (l.classList.contains('diff-hunk') || l.classList.contains('diff-note')) return;
      var sign = l.querySelector('.diff-sign');
      var cl = l.querySelector('.cl');
      lines.push((sign && sign.textContent !== ' ' ? (sign.textContent === '−' ? '-' : sign.textContent) : (sign ? ' ' : '')) + (cl ? cl.textContent : ''));
    });
    return lines.join('\n') + '\n';
  }
  function copyText(text, button) {
    var done = function () {
      var old = button.textContent;
      button.textContent = 'Copied';
      setTimeout(function () { button.textContent = old; }, 1200);
    };
    var fallback = function () {
      var ta = document.createElement('textarea');
      ta.value = text;
      ta.setAttribute('readonly', '');
      ta.style.position = 'fixed';
      ta.style.opacity = '0';
      document.body.appendChild(ta);
      ta.select();
      try { document.execCommand('copy'); done(); } catch (err) { button.textContent = 'Select and copy'; }
      document.body.removeChild(ta);
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, fallback);
    } else {
      fallback();
    }
  }
  document.querySelectorAll('pre.chroma').forEach(function (pre) {
    var wrap = document.createElement('div');
    wrap.className = 'code-block';
    pre.parentNode.insertBefore(wrap, pre);
    wrap.appendChild(pre);
    var button = document.createElement('button');
    button.type = 'button';
    button.className = 'copy-button';
    button.textContent = 'Copy';
    button.setAttribute('aria-label', 'Copy this code');
    button.addEventListener('click', function () { copyText(codeText(pre), button); });
    wrap.appendChild(button);
  });
  document.querySelectorAll('.reproduce code.command, .content p code.command').forEach(function (code) {
    var button = document.createElement('button');
    button.type = 'button';
    button.className = 'copy-inline';
    button.textContent = 'Copy';
    button.setAttribute('aria-label', 'Copy the command');
    button.addEventListener('click', function () { copyText(code.textContent, button); });
    code.parentNode.insertBefore(button, code.nextSibling);
  });

  // A fragment: open the folded diff it points into, and on a source page
  // mark the span of lines #L17-L31 names.
  function followHash() {
    var hash = decodeURIComponent(window.location.hash.slice(1));
    if (!hash) return;
    var m = /^L(\d+)(?:-L(\d+))?$/.exec(hash);
    document.querySelectorAll('.line.hl').forEach(function (l) { l.classList.remove('hl'); });
    var target = document.getElementById(m ? 'L' + m[1] : hash);
    if (!target) return;
    if (m) {
      var first = +m[1], last = m[2] ? +m[2] : first;
      for (var n = first; n <= last; n++) {
        var line = document.getElementById('L' + n);
        if (line) line.classList.add('hl');
      }
    }
    for (var el = target; el; el = el.parentElement) {
      if (el.tagName === 'DETAILS') el.open = true;
    }
    target.scrollIntoView({ block: m ? 'center' : 'start' });
  }
  window.addEventListener('hashchange', followHash);
  followHash();

  // Scroll the sidebar (not the page) so the current chapter is in view.
  var sidebar = document.querySelector('.sidebar');
  var active = document.querySelector('.sidebar a.active');
  if (sidebar && active) {
    var top = active.offsetTop - sidebar.offsetTop;
    if (top > sidebar.clientHeight - 60) sidebar.scrollTop = top - sidebar.clientHeight / 2;
  }

  // Mark the heading being read in "On this page".
  var tocLinks = document.querySelectorAll('.page-toc a');
  if (tocLinks.length && 'IntersectionObserver' in window) {
    var byId = {};
    var headings = [];
    tocLinks.forEach(function (a) {
      var id = decodeURIComponent(a.getAttribute('href').slice(1));
      var h = document.getElementById(id);
      if (h) {
        byId[id] = a;
        headings.push(h);
      }
    });
    var visible = {};
    var mark = function () {
      var current = null;
      for (var i = 0; i < headings.length; i++) {
        if (visible[headings[i].id]) { current = headings[i].id; break; }
      }
      if (!current) {
        for (var j = headings.length - 1; j >= 0; j--) {
          if (headings[j].getBoundingClientRect().top < 0) { current = headings[j].id; break; }
        }
      }
      tocLinks.forEach(function (a) { a.classList.remove('current'); });
      if (current && byId[current]) byId[current].classList.add('current');
    };
    var observer = new IntersectionObserver(function (entries) {
      entries.forEach(function (en) { visible[en.target.id] = en.isIntersecting; });
      mark();
    }, { rootMargin: '-48px 0px -55% 0px' });
    headings.forEach(function (h) { observer.observe(h); });
  }

  // A printed page cannot be clicked: open folded sections while printing,
  // but not a whole diff, which print.html summarises instead.
  var opened = [];
  window.addEventListener('beforeprint', function () {
    document.querySelectorAll('details:not([open]):not(.unified-diff)').forEach(function (d) {
      d.open = true;
      opened.push(d);
    });
  });
  window.addEventListener('afterprint', function () {
    opened.forEach(function (d) { d.open = false; });
    opened = [];
  });

  // Search. The index is a script the book tool wrote; it is loaded the
  // first time the box is used. Every word typed must start a word of a
  // section (its chapter's title, its heading or its text); headings weigh
  // most.
  var searchInput = document.getElementById('search-input');
  var searchResults = document.getElementById('search-results');
  var searchStatus = document.getElementById('search-status');
  var index = null, loading = null, pending = '';

  function loadIndex(then) {
    if (index) { then(); return; }
    if (!loading) {
      loading = [];
      searchStatus.textContent = 'Loading the index…';
      var s = document.createElement('script');
      s.src = root + 'search-index.js';
      s.onload = function () {
        var raw = window.softgpuSearchIndex;
        index = raw.sections.map(function (sec) {
          var page = raw.pages[sec.p];
          return {
            href: page.p + (sec.i ? '#' + sec.i : ''),
            page: page.t, title: sec.t || page.t,
            text: sec.x, full: page.t + '\n' + (sec.t || '') + '\n' + sec.x,
            lowerTitle: (sec.t || page.t).toLowerCase()
          };
        });
        index.forEach(function (sec) { sec.lower = sec.full.toLowerCase(); });
        searchStatus.textContent = '';
        loading.forEach(function (f) { f(); });
      };
      s.onerror = function () { searchStatus.textContent = 'The search index could not be loaded.'; };
      document.head.appendChild(s);
    }
    loading.push(then);
  }

  // wordStarts lists where term starts a word in text (lower is text in
  // lower case, as long as text): at the start, after a character that is
  // not a letter or digit, or at a change from lower to upper case
  // (devHead's "Head"). So "fault" finds "page fault" and "pageFault" but
  // not "default".
  function wordStarts(text, lower, term, max) {
    var out = [], sameLength = text.length === lower.length;
    for (var at = lower.indexOf(term); at >= 0 && out.length < max; at = lower.indexOf(term, at + 1)) {
      var before = at > 0 ? (sameLength ? text : lower).charAt(at - 1) : '';
      if (at === 0 || !/[A-Za-z0-9]/.test(before) ||
          (sameLength && /[a-z]/.test(before) && /[A-Z]/.test(text.charAt(at)))) out.push(at);
    }
    return out;
  }

  // find returns the sections holding every word of query at a word start,
  // best first: the number of matches, and much more for one in the
  // section's heading; at most limit of them (0: all).
  function find(query, limit) {
    var terms = query.toLowerCase().split(/\s+/).filter(Boolean);
    if (!terms.length || !index) return [];
    var hits = [];
    index.forEach(function (sec) {
      var score = 0;
      for (var i = 0; i < terms.length; i++) {
        var count = wordStarts(sec.full, sec.lower, terms[i], 20).length;
        if (!count) return;
        score += count + (wordStarts(sec.title, sec.lowerTitle, terms[i], 1).length ? 25 : 0);
      }
      hits.push({ sec: sec, score: score });
    });
    hits.sort(function (a, b) { return b.score - a.score; });
    if (limit) hits = hits.slice(0, limit);
    return hits.map(function (h) { return h.sec; });
  }
  // For the browser check: every section a query finds.
  window.softgpuSearch = function (query, then) {
    loadIndex(function () { then(find(query, 0).map(function (s) { return s.href; })); });
  };

  function escapeHTML(s) {
    return s.replace(/[&<>"]/g, function (c) { return { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' }[c]; });
  }
  // snippet is 150 characters of text around the first match, with every
  // match (a word start, as find counts them) marked.
  function snippet(text, terms) {
    var lower = text.toLowerCase(), at = -1;
    for (var i = 0; i < terms.length && at < 0; i++) {
      var first = wordStarts(text, lower, terms[i], 1);
      if (first.length) at = first[0];
    }
    var start = Math.max(0, at - 50);
    var s = (start > 0 ? '…' : '') + text.slice(start, start + 150) + (start + 150 < text.length ? '…' : '');
    var sl = s.toLowerCase(), marks = [];
    terms.forEach(function (t) {
      wordStarts(s, sl, t, 1000).forEach(function (p) { marks.push([p, p + t.length]); });
    });
    marks.sort(function (a, b) { return a[0] - b[0]; });
    var out = '', pos = 0;
    marks.forEach(function (m) {
      if (m[0] < pos) return; // overlaps the last mark
      out += escapeHTML(s.slice(pos, m[0])) + '<mark>' + escapeHTML(s.slice(m[0], m[1])) + '</mark>';
      pos = m[1];
    });
    return out + escapeHTML(s.slice(pos));
  }

  function show(query) {
    var terms = query.toLowerCase().split(/\s+/).filter(Boolean);
    searchResults.innerHTML = '';
    if (!terms.length) { searchStatus.textContent = ''; return; }
    var found = find(query, 30);
    searchStatus.textContent = found.length ? found.length + (found.length === 30 ? '+' : '') + ' sections found; ↓ to go through them' : 'Nothing found for “' + query + '”.';
    found.forEach(function (sec) {
      var li = document.createElement('li');
      var a = document.createElement('a');
      a.href = root + sec.href;
      a.innerHTML = '<span class="result-title">' + escapeHTML(sec.title) + '</span>' +
        (sec.title !== sec.page ? '<span class="result-where">' + escapeHTML(sec.page) + '</span>' : '') +
        '<span class="result-text">' + snippet(sec.text, terms) + '</span>';
      li.appendChild(a);
      searchResults.appendChild(li);
    });
  }

  if (searchInput) {
    var timer = 0;
    searchInput.addEventListener('focus', function () { loadIndex(function () {}); });
    searchInput.addEventListener('input', function () {
      pending = searchInput.value;
      clearTimeout(timer);
      timer = setTimeout(function () { loadIndex(function () { show(pending); }); }, 80);
    });
    searchInput.addEventListener('keydown', function (e) {
      var first = searchResults.querySelector('a');
      if (e.key === 'ArrowDown' && first) { e.preventDefault(); first.focus(); }
      if (e.key === 'Enter' && first) { e.preventDefault(); window.location.href = first.href; }
      if (e.key === 'Escape') { searchInput.value = ''; show(''); }
    });
    searchResults.addEventListener('keydown', function (e) {
      var links = Array.prototype.slice.call(searchResults.querySelectorAll('a'));
      var i = links.indexOf(document.activeElement);
      if (i < 0) return;
      if (e.key === 'ArrowDown' && i + 1 < links.length) { e.preventDefault(); links[i + 1].focus(); }
      if (e.key === 'ArrowUp') { e.preventDefault(); (i > 0 ? links[i - 1] : searchInput).focus(); }
      if (e.key === 'Escape') { e.preventDefault(); searchInput.focus(); }
    });
  }
})();
