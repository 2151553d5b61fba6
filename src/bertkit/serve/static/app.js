// The page calls the service's JSON endpoints and draws what comes back. No framework, no build step.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { pipelines: [], labels: [], attention: null };
const ENTITY_COLOURS = ["#fde68a", "#bfdbfe", "#bbf7d0", "#fbcfe8", "#ddd6fe", "#fed7aa", "#a5f3fc"];
const MASK = /\[mask\]/i;

async function post(path, body) {
  const response = await fetch(path, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  const data = await response.json().catch(() => ({}));
  const error = data.error && (data.error.message || data.error);  // OpenAI's routes nest the message
  if (!response.ok) throw new Error(error || `${path} answered ${response.status}`);
  return data;
}

function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes)) {
    if (key === "class") node.className = value;
    else if (key === "style") node.style.cssText = value;
    else node.setAttribute(key, value);
  }
  for (const child of children) node.append(child);
  return node;
}

function barRow(name, value, extra) {
  const row = el("div", { class: "bar-row" },
    el("span", { class: "name" }, name),
    el("span", { class: "bar" }, el("span", { style: `width:${(100 * value).toFixed(1)}%` })),
    el("span", { class: "value" }, `${(100 * value).toFixed(1)}%`));
  if (extra) row.append(el("span", { class: "sequence" }, extra));
  return row;
}

function show(id, visible) { $(id).hidden = !visible; }

function setStatus(message, isError = false) {
  $("status").textContent = message;
  $("status").classList.toggle("error", isError);
}

// ------------------------------------------------------------------ model info
async function init() {
  try {
    const info = await (await fetch("/info")).json();
    state.pipelines = info.pipelines;
    const m = info.model;
    $("model").textContent = `${m.architecture}: ${m.layers} layers, ${m.heads} heads, width ${m.hidden_size}` +
      ` · can do ${info.pipelines.join(", ")}`;
    show("next-row", has("next-sentence"));
    show("question-row", has("answer"));
    state.labels = m.labels || [];
    if (has("classify") && state.labels.length) $("model").textContent += ` · labels: ${state.labels.join(", ")}`;
    fitInputToTask();
  } catch (error) {
    setStatus(`Cannot reach the service: ${error.message}`, true);
  }
}

const has = (pipeline) => state.pipelines.includes(pipeline);
// A model with no task head (a plain encoder, a sentence-embedding checkpoint): embeddings and attention only.
const embeddingOnly = () => state.pipelines.every((p) => p === "embed" || p === "attention");

// The example text, its hint and placeholder follow what the model does.
const TASK_INPUTS = {
  "fill-mask": ["The capital of France is [MASK].", "— put <code>[MASK]</code> where BERT should guess a word",
    "A sentence with [MASK] where a word should go"],
  classify: ["This film was a delight from start to finish.", "", "A text to classify"],
  tag: ["George Washington lived in Mount Vernon, Virginia, and led the Continental Army.",
    "— BERT marks the names it finds", "A text whose names and places to find"],
  answer: ["George Washington lived in Mount Vernon, Virginia, and led the Continental Army.",
    "— a passage; the question below is answered from it", "A passage that holds the answer"],
  embed: ["A man is playing a guitar.", "— its attention map; compare sentences in the panel below",
    "A sentence to see what BERT attends to"],
};

function fitInputToTask() {
  const task = ["fill-mask", "classify", "tag", "answer"].find(has) || "embed";
  const [value, hint, placeholder] = TASK_INPUTS[task];
  $("text").value = value;
  $("text").placeholder = placeholder;
  $("text-hint").innerHTML = task === "classify" && state.labels.length
    ? "— BERT labels it as one of " : hint;
  if (task === "classify" && state.labels.length) {
    $("text-hint").append(state.labels.map((l) => `“${l}”`).join(", "));
  }
  if (has("answer")) $("question").value = "Where did George Washington live?";
  show("similarity-card", embeddingOnly());
  show("search-card", embeddingOnly());
  $("text").disabled = $("submit").disabled = false;
}

// ------------------------------------------------------------------ the form
async function analyse(event) {
  event.preventDefault();
  const text = $("text").value.trim();
  if (!text) { setStatus("Type a sentence first.", true); return; }
  $("submit").disabled = true;
  setStatus("Thinking…");
  // Each panel is redrawn by its own request; a failed request hides its panel (no stale results).
  const guard = (card, promise) => promise.catch((error) => { show(card, false); throw error; });
  const jobs = [guard("attention-card", runAttention(text))];
  if (has("fill-mask") && MASK.test(text)) jobs.push(guard("predictions-card", runFillMask(text)));
  else show("predictions-card", false);
  const next = $("next").value.trim();
  if (has("next-sentence") && next) jobs.push(guard("next-card", runNextSentence(text, next)));
  else show("next-card", false);
  if (has("classify")) jobs.push(guard("classify-card", runClassify(text)));
  if (has("tag")) jobs.push(guard("entities-card", runTag(text)));
  const question = $("question").value.trim();
  if (has("answer") && question) jobs.push(guard("answer-card", runAnswer(question, text)));
  else show("answer-card", false);
  const results = await Promise.allSettled(jobs);
  const failed = results.filter((r) => r.status === "rejected");
  if (failed.length) setStatus(failed.map((r) => r.reason.message).join(" · "), true);
  else setStatus("");
  if (has("fill-mask") && !MASK.test(text) && !failed.length) {
    setStatus("Tip: add [MASK] to the text to see BERT's guesses.");
  }
  $("submit").disabled = false;
}

async function runFillMask(text) {
  const { results } = await post("/fill-mask", { texts: [text], top_k: 5 });
  const box = $("predictions");
  box.replaceChildren();
  results[0].forEach((candidates, index) => {
    const group = el("div", { class: "mask-group" });
    if (results[0].length > 1) group.append(el("h3", { class: "small muted" }, `[MASK] ${index + 1}`));
    for (const c of candidates) {
      const row = barRow(c.text, c.score, c.sequence);
      row.classList.add("prediction");
      group.append(row);
    }
    box.append(group);
  });
  show("predictions-card", true);
}

async function runNextSentence(first, second) {
  const { results } = await post("/next-sentence", { pairs: [[first, second]] });
  $("next-result").replaceChildren(barRow("follows", results[0].probability));
  show("next-card", true);
}

async function runClassify(text) {
  const { results } = await post("/classify", { texts: [text] });
  const prediction = results[0];
  const box = $("classes");
  box.replaceChildren();
  $("class-best").replaceChildren(prediction.label === null ? "" : el("span", { class: "label" }, prediction.label),
    prediction.label === null ? "" : ` ${(100 * prediction.score).toFixed(1)}%`);
  if (prediction.probabilities) {
    const sorted = Object.entries(prediction.probabilities).sort((a, b) => b[1] - a[1]);
    for (const [label, p] of sorted) box.append(barRow(label, p));
  } else {
    box.append(el("p", {}, `Score: ${prediction.score.toFixed(4)}`));
  }
  show("classify-card", true);
}

function markSpans(text, spans) {
  // spans: [{start, end, label, colour}] sorted and disjoint; the rest of the text stays plain.
  const nodes = [];
  let cursor = 0;
  for (const span of spans) {
    if (span.start > cursor) nodes.push(text.slice(cursor, span.start));
    const mark = el("mark", { style: `background:${span.colour}` }, text.slice(span.start, span.end));
    if (span.label) mark.append(el("span", { class: "tag" }, span.label));
    nodes.push(mark);
    cursor = span.end;
  }
  nodes.push(text.slice(cursor));
  return nodes;
}

async function runTag(text) {
  const { results } = await post("/tag", { texts: [text] });
  const entities = results[0].entities;
  const types = [...new Set(entities.map((e) => e.type))];
  const colour = (type) => ENTITY_COLOURS[types.indexOf(type) % ENTITY_COLOURS.length];
  $("entities").replaceChildren(...markSpans(text,
    entities.map((e) => ({ start: e.start, end: e.end, label: e.type, colour: colour(e.type) }))));
  $("entity-legend").replaceChildren(...(entities.length
    ? types.map((t) => el("mark", { style: `background:${colour(t)}` }, t))
    : [el("span", { class: "muted" }, "No entities found.")]));
  show("entities-card", true);
}

async function runAnswer(question, context) {
  const { results } = await post("/answer", { inputs: [{ question, context }], top_k: 3 });
  const [best, ...others] = results[0];
  const box = $("answer");
  if (best && best.start !== null) {
    box.replaceChildren(...markSpans(context, [{ start: best.start, end: best.end,
      label: `${(100 * best.score).toFixed(0)}%`, colour: "#bbf7d0" }]));
  } else {
    box.replaceChildren(el("span", { class: "muted" }, "The model finds no answer in the text."));
  }
  $("answer-alternatives").replaceChildren(...others.filter((a) => a.text).map((a) =>
    el("li", {}, `${a.text} (${(100 * a.score).toFixed(1)}%)`)));
  show("answer-card", true);
}

// ------------------------------------------------------------------ similarity
async function runSimilarity(event) {
  event.preventDefault();
  const sentences = $("sentences").value.split("\n").map((s) => s.trim()).filter(Boolean);
  if (sentences.length < 2) { setStatus("Give two or more sentences, one a line.", true); return; }
  $("compare").disabled = true;
  try {
    // Unit-length vectors: their dot product is the cosine.
    const { embeddings } = await post("/embed", { texts: sentences, normalize: true });
    const cosine = (a, b) => a.reduce((sum, x, k) => sum + x * b[k], 0);
    const header = el("tr", {}, el("th", {}, ""), ...sentences.map((_, j) => el("th", {}, `#${j + 1}`)));
    const rows = sentences.map((sentence, i) => el("tr", {}, el("th", { class: "sentence", title: sentence },
      `#${i + 1} ${sentence}`), ...sentences.map((_, j) => {
      const value = cosine(embeddings[i], embeddings[j]);
      return el("td", { "data-i": i, "data-j": j, "data-value": value,
        style: `background:${colourFor(Math.max(0, value))};color:${value > 0.6 ? "white" : "inherit"}` },
      value.toFixed(3));
    })));
    $("similarity").replaceChildren(el("table", { class: "matrix" }, el("thead", {}, header), el("tbody", {}, ...rows)));
    setStatus("");
  } catch (error) {
    $("similarity").replaceChildren();
    setStatus(error.message, true);
  } finally {
    $("compare").disabled = false;
  }
}

// ------------------------------------------------------------------ search
async function runSearch(event) {
  event.preventDefault();
  const passages = $("passages").value.split("\n").map((s) => s.trim()).filter(Boolean);
  const query = $("query").value.trim();
  if (!passages.length || !query) { setStatus("Give a query and one or more passages, one a line.", true); return; }
  $("search").disabled = true;
  try {
    // The OpenAI-compatible route, with the model's own defaults; the cosine does not need unit vectors.
    const { data } = await post("/v1/embeddings", { input: [query, ...passages] });
    const vectors = data.map((d) => d.embedding);
    const norm = (a) => Math.sqrt(a.reduce((sum, x) => sum + x * x, 0)) || 1;
    const cosine = (a, b) => a.reduce((sum, x, k) => sum + x * b[k], 0) / (norm(a) * norm(b));
    const ranked = passages.map((passage, i) => ({ passage, i, score: cosine(vectors[0], vectors[i + 1]) }))
      .sort((a, b) => b.score - a.score);
    $("ranking").replaceChildren(...ranked.map(({ passage, i, score }) => el("li",
      { class: "bar-row", "data-index": i, "data-score": score },
      el("span", { class: "name" }, passage),
      el("span", { class: "bar" }, el("span", { style: `width:${(100 * Math.max(0, score)).toFixed(1)}%` })),
      el("span", { class: "value" }, score.toFixed(3)))));
    setStatus("");
  } catch (error) {
    $("ranking").replaceChildren();
    setStatus(error.message, true);
  } finally {
    $("search").disabled = false;
  }
}

// ------------------------------------------------------------------ attention
async function runAttention(text) {
  const data = await post("/attention", { text });
  state.attention = data;
  const layers = data.attentions.length;
  const heads = data.attentions[0].length;
  const layer = $("layer");
  const head = $("head");
  const keepLayer = Math.min(Number(layer.value || layers - 1), layers - 1);
  const keepHead = head.value || "mean";
  layer.replaceChildren(...Array.from({ length: layers }, (_, i) => el("option", { value: i }, String(i + 1))));
  head.replaceChildren(el("option", { value: "mean" }, "all (mean)"),
    ...Array.from({ length: heads }, (_, i) => el("option", { value: i }, String(i + 1))));
  layer.value = String(keepLayer);
  head.value = keepHead === "mean" || Number(keepHead) < heads ? keepHead : "mean";
  show("attention-card", true);
  drawAttention();
}

function currentMatrix() {
  const { attentions } = state.attention;
  const layer = attentions[Number($("layer").value)];
  const head = $("head").value;
  if (head !== "mean") return layer[Number(head)];
  const n = layer[0].length;
  return Array.from({ length: n }, (_, i) => Array.from({ length: n },
    (_, j) => layer.reduce((sum, h) => sum + h[i][j], 0) / layer.length));
}

function drawAttention() {
  if (!state.attention) return;
  const view = document.querySelector('input[name="view"]:checked').value;
  show("heatmap-wrap", view === "heatmap");
  show("lines-wrap", view === "lines");
  const matrix = currentMatrix();
  if (view === "heatmap") drawHeatmap(matrix);
  else drawLines(matrix);
  $("attention-card").dataset.ready = "true";
}

function colourFor(value) {
  // white to the accent blue; a square root makes small weights visible
  const t = Math.sqrt(Math.max(0, Math.min(1, value)));
  const mix = (a, b) => Math.round(a + (b - a) * t);
  return `rgb(${mix(255, 36)},${mix(255, 86)},${mix(255, 199)})`;
}

function drawHeatmap(matrix) {
  const tokens = state.attention.tokens;
  const n = tokens.length;
  const canvas = $("heatmap");
  const context = canvas.getContext("2d");
  context.font = "12px system-ui, sans-serif";
  const label = Math.min(110, Math.max(...tokens.map((t) => context.measureText(t).width)) + 8);
  const available = Math.max(200, $("heatmap-wrap").clientWidth - label - 4);
  const cell = Math.max(8, Math.min(28, Math.floor(available / n)));
  const width = label + cell * n;
  const height = label + cell * n;
  const ratio = window.devicePixelRatio || 1;
  canvas.width = width * ratio;
  canvas.height = height * ratio;
  canvas.style.width = `${width}px`;
  canvas.style.height = `${height}px`;
  context.setTransform(ratio, 0, 0, ratio, 0, 0);
  context.clearRect(0, 0, width, height);
  context.font = "12px system-ui, sans-serif";
  context.fillStyle = "#1d2330";
  context.textBaseline = "middle";
  for (let i = 0; i < n; i++) {
    context.textAlign = "right";
    context.fillText(tokens[i], label - 4, label + cell * i + cell / 2, label - 6);
    context.save();
    context.translate(label + cell * i + cell / 2, label - 4);
    context.rotate(-Math.PI / 2);
    context.textAlign = "left";
    context.fillText(tokens[i], 0, 0, label - 6);
    context.restore();
  }
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < n; j++) {
      context.fillStyle = colourFor(matrix[i][j]);
      context.fillRect(label + cell * j, label + cell * i, cell, cell);
    }
  }
  canvas.onmousemove = canvas.onclick = (event) => {
    const box = canvas.getBoundingClientRect();
    const j = Math.floor((event.clientX - box.left - label) / cell);
    const i = Math.floor((event.clientY - box.top - label) / cell);
    $("attention-readout").textContent = i >= 0 && j >= 0 && i < n && j < n
      ? `${tokens[i]} → ${tokens[j]}: ${(100 * matrix[i][j]).toFixed(1)}%` : "";
  };
}

function drawLines(matrix) {
  const tokens = state.attention.tokens;
  const n = tokens.length;
  const svg = $("lines");
  const ns = "http://www.w3.org/2000/svg";
  const rowHeight = 22;
  const width = Math.min(520, Math.max(280, $("lines-wrap").clientWidth - 4));
  const height = rowHeight * n + 10;
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  svg.setAttribute("width", width);
  svg.setAttribute("height", height);
  svg.replaceChildren();
  const left = 110;
  const right = width - 110;
  const y = (i) => 10 + rowHeight * i + rowHeight / 2;
  const group = document.createElementNS(ns, "g");
  svg.append(group);
  const draw = (focus) => {
    group.replaceChildren();
    for (let i = 0; i < n; i++) {
      if (focus !== null && i !== focus) continue;
      for (let j = 0; j < n; j++) {
        const weight = matrix[i][j];
        if (weight < 0.02) continue;
        const line = document.createElementNS(ns, "line");
        line.setAttribute("x1", left); line.setAttribute("y1", y(i));
        line.setAttribute("x2", right); line.setAttribute("y2", y(j));
        line.setAttribute("stroke", "#2456c7");
        line.setAttribute("stroke-opacity", Math.min(1, weight * (focus === null ? 1 : 1.5)).toFixed(3));
        line.setAttribute("stroke-width", (1 + 3 * weight).toFixed(2));
        group.append(line);
      }
    }
  };
  tokens.forEach((token, i) => {
    for (const [x, anchor] of [[left - 6, "end"], [right + 6, "start"]]) {
      const label = document.createElementNS(ns, "text");
      label.setAttribute("x", x);
      label.setAttribute("y", y(i) + 4);
      label.setAttribute("text-anchor", anchor);
      label.textContent = token;
      if (anchor === "end") {
        label.addEventListener("mouseenter", () => { draw(i); label.classList.add("active"); });
        label.addEventListener("mouseleave", () => { draw(null); label.classList.remove("active"); });
        label.addEventListener("click", () => draw(i));
      }
      svg.append(label);
    }
  });
  draw(null);
}

$("form").addEventListener("submit", analyse);
$("similarity-form").addEventListener("submit", runSimilarity);
$("search-form").addEventListener("submit", runSearch);
$("layer").addEventListener("change", drawAttention);
$("head").addEventListener("change", drawAttention);
for (const radio of document.querySelectorAll('input[name="view"]')) radio.addEventListener("change", drawAttention);
window.addEventListener("resize", () => { if (state.attention) drawAttention(); });
init();
