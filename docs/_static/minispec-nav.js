/* The sidebar buttons at every width.
 *
 * pydata-sphinx-theme 0.20 binds the ☰ and "On this page" handlers to the first
 * .primary-toggle / .secondary-toggle in the page, and sphinx-book-theme 1.4 puts its own,
 * visible, buttons after those (pydata-sphinx-theme#2451, sphinx-book-theme#988): the
 * visible buttons do nothing, on a phone and on a wide screen alike. Each visible button
 * here clicks the bound one, so both themes' handlers run as they mean to. Drop this file
 * (and its line in docs/conf.py) once the pinned themes fix #2451.
 *
 * It also names three controls whose names axe (WCAG 2.5.3, 4.1.2) finds wrong: the theme's
 * search buttons and myst-nb's folds are labelled "Search" and "Toggle hidden content"
 * while they show other words (their visible text names them once the label goes), and the
 * contents' expand arrows have no name at all.
 */
(function () {
  "use strict";

  function forward(selector) {
    const bound = document.querySelector(selector);
    if (!bound) return;
    for (const button of document.querySelectorAll(selector)) {
      if (button === bound) continue;
      button.addEventListener("click", (event) => {
        event.preventDefault();
        event.stopPropagation();
        bound.click();
      });
    }
  }

  function name() {
    for (const control of document.querySelectorAll("button.search-button-field, details.hide > summary")) {
      control.removeAttribute("aria-label");
    }
    for (const summary of document.querySelectorAll("nav li.has-children > details > summary")) {
      const link = summary.closest("li").querySelector(":scope > a");
      if (link) summary.setAttribute("aria-label", `pages under ${link.textContent.trim()}`);
    }
  }

  function start() {
    forward(".primary-toggle");
    forward(".secondary-toggle");
    name();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
