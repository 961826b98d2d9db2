"""One colour palette for every figure: Okabe-Ito, which stays distinguishable
with the common colour-vision deficiencies. Figures still never rely on colour
alone (marks, hatching or text go with it)."""

OKABE_ITO = {"blue": "#0072B2", "orange": "#E69F00", "green": "#009E73", "purple": "#CC79A7",
             "vermillion": "#D55E00", "sky": "#56B4E9", "yellow": "#F0E442", "grey": "#999999"}
# For series told apart by order (lines, batches): the seven colours, grey left out.
SERIES = [c for name, c in OKABE_ITO.items() if name != "grey"]
