/* The sidebar buttons at every width.
 *
 * pydata-sphinx-theme 0.20 binds the ☰ and "On this page" handlers to the first
 * .primary-toggle / .secondary-toggle in the page, and sphinx-book-theme 1.4 puts its own,
 * visible, buttons after those (pydata-sphinx-theme#2451, sphinx-book-theme#988): the
 * visible buttons do nothing, on a phone and on a wide screen alike. Each visible button
 * here clicks the bound one, so both themes' handlers run as they mean to. Drop this file
 * (and its line in docs/conf.py) once the pinned themes fix #2451.
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

  function start() {
    forward(".primary-toggle");
    forward(".secondary-toggle");
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
