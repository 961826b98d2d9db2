// The linked stepper without a kernel (minispec.lab.viz.static_stepper).
// Each <div class="minispec-stepper"> holds a manifest: every stop of every preset as
// [step, stage, label, position, scheduler text], and where its frames are. The rules
// are the live widget's (minispec/lab/viz/stepper.py, widgets.py): next / prev move one
// stop; the slider and the stage toggle go to the nearest recorded stop; the preset
// toggle keeps the step and stage as nearly as the other run allows; play moves one
// stop every two seconds until the last. "projector" fills the screen with the stepper: the
// stage's own strip, drawn larger and without the legend (as the live widget's projector mode),
// across the width, under the controls (Escape or the button again leaves); on a phone the
// figures keep a legible size and scroll sideways inside their own box.
"use strict";

(function () {
  const PLAY_MS = 2000;

  function el(tag, attrs, text) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function siteRoot() {
    const root = document.documentElement.dataset.content_root;
    if (root !== undefined) return root;
    return (window.DOCUMENTATION_OPTIONS && DOCUMENTATION_OPTIONS.URL_ROOT) || "";
  }

  // stepper.nearest_stop: the closest step first, then the closest stage; the first such stop.
  function nearest(stops, step, stage) {
    let best = 0;
    for (let i = 1; i < stops.length; i++) {
      const [s, st] = stops[i], [bs, bst] = stops[best];
      const d = Math.abs(s - step), bd = Math.abs(bs - step);
      if (d < bd || (d === bd && Math.abs(st - stage) < Math.abs(bst - stage))) best = i;
    }
    return best;
  }

  function toggles(name, options, onPick) {
    const box = el("div", {class: "ms-toggles", role: "group", "aria-label": name});
    box.appendChild(el("span", {class: "ms-caption"}, name));
    const buttons = options.map(([label, value]) => {
      const b = el("button", {type: "button", class: "ms-toggle", "data-value": String(value)}, label);
      b.addEventListener("click", () => onPick(value));
      box.appendChild(b);
      return b;
    });
    return {box, mark(value) {
      for (const b of buttons) b.setAttribute("aria-pressed", String(b.dataset.value === String(value)));
    }};
  }

  function build(root) {
    const data = JSON.parse(root.querySelector("script.minispec-stepper-data").textContent);
    const frames = siteRoot() + data.frames;
    const presets = Object.keys(data.presets);
    const state = {preset: data.start.preset, index: 0, timer: null};
    state.index = nearest(data.presets[state.preset], data.start.step, data.start.stage);

    const play = el("button", {type: "button", class: "ms-button ms-play", title: "play"}, "▶ play");
    const prev = el("button", {type: "button", class: "ms-button ms-prev"}, "◀ prev");
    const next = el("button", {type: "button", class: "ms-button ms-next"}, "next ▶");
    const slider = el("input", {type: "range", class: "ms-slider", min: "0", "aria-label": "step"});
    const stepOut = el("output", {class: "ms-step"});
    const stage = toggles("stage", [...Array(data.stages).keys()].map(s => [`stage ${s}`, s]), pickStage);
    const preset = toggles("preset", presets.map(p => [p, p]), pickPreset);
    const label = el("div", {class: "ms-label", "aria-live": "polite"});
    const gantt = data.gantt && el("img", {class: "ms-gantt", width: data.gantt[0], height: data.gantt[1],
                                            alt: "the pipeline's Gantt chart, the current step and stage outlined"});
    const strip = el("img", {class: "ms-strip", width: data.strip[0], height: data.strip[1],
                             alt: "every stage's rows of token_ids_cpu at this step"});
    const text = el("pre", {class: "ms-text"});
    const projector = el("button", {type: "button", class: "ms-button ms-projector-button", "aria-pressed": "false",
                                    title: "fill the screen with the stepper (Escape leaves)"}, "projector view");
    const figures = el("div", {class: "ms-figures"});
    figures.append(...(gantt ? [gantt] : []), strip);

    const controls = el("div", {class: "ms-row"});
    const stepBox = el("label", {class: "ms-slider-box"});
    stepBox.append(el("span", {class: "ms-caption"}, "step"), slider, stepOut);
    controls.append(play, prev, next, stepBox, projector);
    const toggleRow = el("div", {class: "ms-row"});
    toggleRow.append(stage.box, preset.box);
    root.replaceChildren(controls, toggleRow, label, figures, text);

    function stops() { return data.presets[state.preset]; }
    function frame(stop, figure) { return `${frames}${state.preset}/${stop[0]}-${stop[1]}-${figure}.png`; }

    function show() {
      const all = stops(), stop = all[state.index];
      const [step, st, lab, position, schedule] = stop;
      slider.max = String(Math.max(...all.map(s => s[0])));
      slider.value = String(step);
      stepOut.textContent = String(step);
      stage.mark(st);
      preset.mark(state.preset);
      label.replaceChildren(el("b", {}, lab), document.createTextNode(`  — ${position}`));
      text.textContent = schedule;
      const projecting = root.classList.contains("ms-projecting") && data.projector;
      strip.src = frame(stop, projecting ? "projector" : "strip");
      const [w, h] = projecting ? data.projector : data.strip;
      strip.setAttribute("width", w);
      strip.setAttribute("height", h);
      if (gantt) gantt.src = frame(stop, "gantt");
      root.dataset.step = String(step);
      root.dataset.stage = String(st);
      root.dataset.preset = state.preset;
      const after = all[state.index + 1];  // fetched ahead, so next shows at once
      if (after) for (const f of gantt ? ["strip", "gantt"] : ["strip"]) new Image().src = frame(after, f);
    }

    function go(index) {
      state.index = Math.max(0, Math.min(stops().length - 1, index));
      show();
    }

    function pickStage(s) { go(nearest(stops(), stops()[state.index][0], s)); }

    function pickPreset(p) {
      const [step, st] = stops()[state.index];
      state.preset = p;
      go(nearest(stops(), step, st));
    }

    function stopPlaying() {
      clearInterval(state.timer);
      state.timer = null;
      play.textContent = "▶ play";
    }

    play.addEventListener("click", () => {
      if (state.timer) return stopPlaying();
      if (state.index === stops().length - 1) go(0);
      play.textContent = "❚❚ pause";
      state.timer = setInterval(() => {
        if (state.index >= stops().length - 1) return stopPlaying();
        go(state.index + 1);
      }, PLAY_MS);
    });
    function project(on) {
      root.classList.toggle("ms-projecting", on);
      projector.setAttribute("aria-pressed", String(on));
      document.documentElement.classList.toggle("ms-projecting-page", on);
      show();  // the projector's frame, or the laptop's
    }
    projector.addEventListener("click", () => project(!root.classList.contains("ms-projecting")));
    root.addEventListener("keydown", (event) => { if (event.key === "Escape") project(false); });
    prev.addEventListener("click", () => go(state.index - 1));
    next.addEventListener("click", () => go(state.index + 1));
    slider.addEventListener("input", () => { stepOut.textContent = slider.value; });
    slider.addEventListener("change", () => go(nearest(stops(), Number(slider.value), stops()[state.index][1])));
    show();
  }

  function start() {
    for (const root of document.querySelectorAll("div.minispec-stepper")) {
      if (root.querySelector("script.minispec-stepper-data")) build(root);
    }
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
