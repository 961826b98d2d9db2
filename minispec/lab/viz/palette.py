"""One colour palette for every figure: Okabe-Ito, which stays distinguishable
with the common colour-vision deficiencies. Figures still never rely on colour
alone (marks, hatching or text go with it). Every colour a figure uses is named
here; the greys and the one tint carry no meaning of their own.
"""

OKABE_ITO = {"blue": "#0072B2", "orange": "#E69F00", "green": "#009E73", "purple": "#CC79A7",
             "vermillion": "#D55E00", "sky": "#56B4E9", "yellow": "#F0E442", "grey": "#999999"}
# For series told apart by order (lines, batches): the seven colours, grey left out.
SERIES = [c for name, c in OKABE_ITO.items() if name != "grey"]

TEXT = "#333333"  # labels and annotations
TEXT_FAINT = "#444444"  # small print: positions, captions
EDGE = "#555555"  # outlines, arrows, the "waiting" bar
EDGE_SOFT = "#888888"
EDGE_LIGHT = "#bbbbbb"
FILL_LIGHT = "#e6e6e6"  # history cells
FILL_IDLE = "#eeeeee"  # idle spans
WHITE = "#ffffff"
PALE_BLUE = "#cfe3f3"  # a tint of Okabe-Ito's sky: agreeing cells, quieter than the hue
