// softgpu book: the few things a static page cannot do alone. Everything
// works without it; it adds ←/→ between chapters, keeps the current chapter
// visible in the sidebar, marks the section being read in "On this page",
// and opens folded diffs for printing.
(function () {
  'use strict';

  // ← and → follow the previous and next links, as in mdBook, unless the
  // reader is typing or holding a modifier.
  document.addEventListener('keydown', function (e) {
    if (e.altKey || e.ctrlKey || e.metaKey || e.shiftKey || e.defaultPrevented) return;
    var t = e.target;
    if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName))) return;
    var rel = e.key === 'ArrowLeft' ? 'prev' : e.key === 'ArrowRight' ? 'next' : '';
    if (!rel) return;
    var a = document.querySelector('.chapter-nav a[rel="' + rel + '"]');
    if (a) {
      e.preventDefault();
      window.location.href = a.href;
    }
  });

  // Escape closes the sidebar where it covers the page.
  var toggle = document.getElementById('sidebar-toggle');
  document.addEventListener('keydown', function (e) {
    if (e.key === 'Escape' && toggle && toggle.checked && window.matchMedia('(max-width: 899px)').matches) {
      toggle.checked = false;
    }
  });

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
        // Nothing in view: the last heading above the viewport.
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

  // A printed page cannot be clicked: open folded diffs while printing.
  var opened = [];
  window.addEventListener('beforeprint', function () {
    document.querySelectorAll('details:not([open])').forEach(function (d) {
      d.open = true;
      opened.push(d);
    });
  });
  window.addEventListener('afterprint', function () {
    opened.forEach(function (d) { d.open = false; });
    opened = [];
  });
})();
