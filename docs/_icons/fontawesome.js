/* The theme's few icons, in place of its 1.5 MB Font Awesome bundle.
 *
 * pydata-sphinx-theme loads _static/scripts/fontawesome.js on every page to turn its
 * <i class="fa-solid fa-bars"> tags into SVG; this site uses ten icons, so the bundle was
 * 60 % of a cold page. docs/_ext/minispec_site.py writes this file over the bundle after
 * each build. The drawings are this project's own (24 px grid, strokes in the text colour);
 * an icon not listed here keeps its <i> tag, and tests/test_docs_site.py fails on it.
 */
(function () {
  "use strict";
  const ICONS = {
    "bars": "M4 6h16M4 12h16M4 18h16",
    "list": "M9 6h11M9 12h11M9 18h11M4 6h.01M4 12h.01M4 18h.01",
    "magnifying-glass": "M11 5a6 6 0 1 0 0 12a6 6 0 1 0 0-12zM15.5 15.5L20 20",
    "sun": "M12 8a4 4 0 1 0 0 8a4 4 0 1 0 0-8zM12 2v2M12 20v2M2 12h2M20 12h2M4.9 4.9l1.4 1.4M17.7 17.7l1.4 1.4" +
           "M4.9 19.1l1.4-1.4M17.7 6.3l1.4-1.4",
    "moon": "M20 14.5A8 8 0 1 1 9.5 4a6.5 6.5 0 0 0 10.5 10.5z",
    "circle-half-stroke": "M12 3a9 9 0 1 0 0 18a9 9 0 1 0 0-18zM12 3v18",
    "angle-left": "M15 5l-7 7 7 7",
    "angle-right": "M9 5l7 7-7 7",
    "arrow-up": "M12 20V5M6 11l6-6 6 6",
    "outdent": "M21 6H11M21 12H11M21 18H11M7 8l-4 4 4 4",
  };
  const FILLED = {"circle-half-stroke": "M12 3a9 9 0 0 0 0 18z"};

  function draw(tag) {
    const name = [...tag.classList].map(c => c.slice(3)).find(n => n in ICONS);
    if (!name) return;
    const fill = FILLED[name] ? `<path d="${FILLED[name]}" fill="currentColor" stroke="none"/>` : "";
    tag.innerHTML = `<svg viewBox="0 0 24 24" width="1em" height="1em" fill="none" stroke="currentColor" ` +
      `stroke-width="2" stroke-linecap="round" stroke-linejoin="round" aria-hidden="true" focusable="false">` +
      `<path d="${ICONS[name]}"/>${fill}</svg>`;
    tag.classList.add("minispec-icon");
  }

  function start() { document.querySelectorAll("i[class*='fa-']").forEach(draw); }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
