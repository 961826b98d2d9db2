/* Written over pydata-sphinx-theme's 1.5 MB _static/scripts/fontawesome.js by
 * docs/_ext/minispec_site.py. That bundle turns each <i class="fa-solid fa-bars"> into an SVG;
 * the theme's own stylesheet already draws the same icons from Font Awesome's web font
 * (_static/vendor/fontawesome/webfonts, about 150 kB, only the weights a page uses are
 * loaded), so the bundle only repeated them and was 60 % of a cold page. */
