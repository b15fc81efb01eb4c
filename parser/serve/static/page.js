/* parser-serve's page: plain JS, no framework, no build step (docs/service.md, "The page").
 *
 * Trees come from POST trees (parser/serve/page.py) as parser.view's SVG, with the CoNLL-U
 * block and each word's most probable heads. Fixing an arc sends the sentence back with the
 * fixed words' HEAD (and DEPREL, once known) and every other word "_", keep_heads=given: the
 * server answers the best tree that keeps them, its marginals conditioned on them, or 400.
 * An annotation file of parser-select is walked word by word (least confident first) and saved
 * with the asked-for words' HEAD and DEPREL filled, every other line as it came. */
"use strict";

const $ = (id) => document.getElementById(id);
const TOKEN_KEY = "parser-serve-token";

const state = {
  token: sessionStorage.getItem(TOKEN_KEY),
  models: {},          // name -> components
  sentences: [],       // {conllu, svg, heads, fixed: Map(dep -> [head, deprel|null])}
  history: [],         // undo: {index, fixed, conllu, svg, heads, annotated}
  selected: null,      // {index, dep}: the word whose head the next click gives
  walk: null,          // the annotation file being walked (startWalk)
  fileName: "trees.conllu",
  busy: false,
};

/* ---- requests -------------------------------------------------------------------------- */

class PageError extends Error {
  constructor(message, status) { super(message); this.status = status; }
}

function askToken(again) {
  const dialog = $("token-dialog");
  $("token").value = "";
  dialog.querySelector("p").textContent = again
    ? "The token was refused. Enter the server's access token."
    : "This server asks for an access token.";
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve($("token").value.trim()), { once: true });
    dialog.showModal();
  });
}

async function api(path, body) {
  for (let attempt = 0; attempt < 3; attempt++) {
    const headers = {};
    if (state.token) headers.Authorization = "Bearer " + state.token;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const answer = await fetch(path, {
      method: body === undefined ? "GET" : "POST", headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (answer.status === 401) {
      state.token = await askToken(attempt > 0 || Boolean(state.token));
      sessionStorage.setItem(TOKEN_KEY, state.token);
      showTokenState();
      continue;
    }
    if (!answer.ok) throw new PageError(await answer.text(), answer.status);
    return answer.json();
  }
  throw new PageError("The server refused the token three times.", 401);
}

function showTokenState() {
  $("token-state").textContent = state.token ? "token given" : "";
}

function say(text, kind) {
  const box = $("message");
  box.textContent = text || "";
  box.className = kind === "note" ? "note" : "";
  box.hidden = !text;
}

async function loadModels() {
  const answer = await api("models");
  state.models = answer.models;
  const select = $("model");
  select.innerHTML = "";
  for (const name of Object.keys(answer.models)) {
    const option = document.createElement("option");
    option.value = option.textContent = name;
    if (name === answer.default_model) option.selected = true;
    select.appendChild(option);
  }
}

/* ---- CoNLL-U --------------------------------------------------------------------------- */

function wordLines(block) {
  return block.split("\n").filter((line) => /^\d+\t/.test(line)).map((line) => line.split("\t"));
}

function comment(block, key) {
  for (const line of block.split("\n")) {
    if (line.startsWith("# " + key + " = ")) return line.slice(key.length + 5).trim();
  }
  return null;
}

function misc(columns, key) {
  for (const item of (columns[9] || "_").split("|")) {
    const [k, v] = item.split("=");
    if (k === key) return v;
  }
  return null;
}

function splitBlocks(text) {
  return text.replace(/\r\n?/g, "\n").split(/\n\s*\n/).filter((b) => b.trim() !== "")
    .map((b) => b.replace(/^\n+/, "") + "\n");
}

/* The sentence as the server reads fixed arcs: HEAD (and DEPREL) of the fixed words, "_"
   on every other word. */
function withFixed(block, fixed) {
  return block.split("\n").map((line) => {
    if (!/^\d+\t/.test(line)) return line;
    const columns = line.split("\t");
    const arc = fixed.get(Number(columns[0]));
    columns[6] = arc ? String(arc[0]) : "_";
    columns[7] = arc && arc[1] ? arc[1] : "_";
    columns[8] = "_";
    return columns.join("\t");
  }).join("\n").trimEnd() + "\n\n";
}

function looksConllu(text) {
  return /^\d+(-\d+)?\t/m.test(text);
}

/* ---- parsing --------------------------------------------------------------------------- */

async function parseText() {
  const text = $("text").value;
  if (!text.trim()) { say("Paste some text first."); return; }
  let input = $("input-format").value;
  if (input === "auto") {
    const tokenizer = (state.models[$("model").value] || []).includes("tokenizer");
    input = looksConllu(text) ? "conllu" : tokenizer ? "raw" : "horizontal";
  }
  stopWalk();
  await run(async () => {
    const answer = await api("trees", { model: $("model").value, data: text, input });
    state.sentences = answer.sentences.map((s) => ({ ...s, fixed: new Map() }));
    state.history = [];
    state.fileName = "trees.conllu";
    renderAll();
    say(state.sentences.length ? "" : "No sentence in the input.");
  });
}

async function run(work) {
  state.busy = true;
  document.body.classList.add("busy");
  try {
    await work();
  } catch (error) {
    say(error.message || String(error));
  } finally {
    state.busy = false;
    document.body.classList.remove("busy");
  }
}

/* The best tree of sentence `index` that keeps its fixed arcs (and, in the walk, its
   annotated words). On a refusal (400: a cycle, two roots) the sentence stays as it was. */
async function redecode(index) {
  const sentence = state.sentences[index];
  const fixed = fixedArcs(index);
  const answer = await api("trees", {
    model: $("model").value, data: withFixed(sentence.conllu, fixed), input: "conllu",
    keep_heads: "given",
  });
  Object.assign(sentence, answer.sentences[0]);
}

function fixedArcs(index) {
  if (!state.walk) return state.sentences[index].fixed;
  const arcs = new Map();
  for (const [key, arc] of state.walk.annotated) {
    const [s, dep] = key.split(":").map(Number);
    if (s === index) arcs.set(dep, [arc.head, arc.deprel]);
  }
  return arcs;
}

function remember(index) {
  const s = state.sentences[index];
  state.history.push({
    index, fixed: new Map(s.fixed), conllu: s.conllu, svg: s.svg, heads: s.heads,
    annotated: state.walk ? new Map(state.walk.annotated) : null,
    position: state.walk ? state.walk.position : null,
  });
}

function undo() {
  const last = state.history.pop();
  if (!last) { say("Nothing to undo.", "note"); return; }
  const s = state.sentences[last.index];
  Object.assign(s, { fixed: last.fixed, conllu: last.conllu, svg: last.svg, heads: last.heads });
  if (state.walk && last.annotated) {
    state.walk.annotated = last.annotated;
    state.walk.position = last.position;
  }
  state.selected = null;
  say("Undone.", "note");
  state.walk ? renderWalk() : renderAll();
}

/* Fix word `dep` of sentence `index` on `head` (0: ROOT), relation `deprel` (null: the
   model's best on that arc), and re-decode the rest. */
async function fixArc(index, dep, head, deprel) {
  if (dep === head) { say("A word cannot be its own head."); return; }
  remember(index);
  const sentence = state.sentences[index];
  if (state.walk) {
    state.walk.annotated.set(index + ":" + dep, { head, deprel: deprel || null });
  } else {
    sentence.fixed.set(dep, [head, deprel || null]);
  }
  await run(async () => {
    try {
      await redecode(index);
      say("");
    } catch (error) {
      const before = state.history.pop();
      Object.assign(sentence, { fixed: before.fixed });
      if (state.walk) state.walk.annotated = before.annotated;
      throw error;
    }
    settleRelation(index, dep);
  });
  state.selected = null;
  if (state.walk) {
    advance();
    renderWalk();
  } else {
    renderAll();
  }
}

/* The relation the model gave a fixed arc is kept with it (a later re-decoding keeps it). */
function settleRelation(index, dep) {
  const columns = wordLines(state.sentences[index].conllu).find((c) => Number(c[0]) === dep);
  if (!columns) return;
  const deprel = columns[7] === "_" ? null : columns[7];
  if (state.walk) {
    const arc = state.walk.annotated.get(index + ":" + dep);
    if (arc && !arc.deprel) arc.deprel = deprel;
  } else {
    const arc = state.sentences[index].fixed.get(dep);
    if (arc && !arc[1]) arc[1] = deprel;
  }
}

async function freeWord(index, dep) {
  const sentence = state.sentences[index];
  if (!sentence.fixed.has(dep)) return;
  remember(index);
  sentence.fixed.delete(dep);
  await run(() => redecode(index));
  state.selected = null;
  renderAll();
}

/* ---- drawing --------------------------------------------------------------------------- */

function figure(sentence, index) {
  const element = document.createElement("figure");
  element.className = "tree";
  element.dataset.index = index;
  const caption = document.createElement("figcaption");
  const id = comment(sentence.conllu, "sent_id");
  const text = comment(sentence.conllu, "text");
  const expected = comment(sentence.conllu, "expected_correct");
  if (expected !== null) {
    const stats = document.createElement("span");
    stats.className = "stats";
    stats.textContent = "expected correct heads " + Number(expected).toFixed(2) + " of "
      + wordLines(sentence.conllu).length;
    caption.appendChild(stats);
  }
  if (id) {
    const span = document.createElement("span");
    span.className = "sent-id";
    span.textContent = id;
    caption.appendChild(span);
  }
  const words = document.createElement("span");
  words.className = "text";
  words.dir = "auto";
  words.textContent = text || wordLines(sentence.conllu).map((c) => c[1]).join(" ");
  caption.appendChild(words);
  const scroll = document.createElement("div");
  scroll.className = "scroll";
  scroll.innerHTML = sentence.svg; // parser.view's SVG, escaped there
  element.append(caption, scroll);
  return element;
}

function decorate(element, index, fixed, current) {
  const svg = element.querySelector("svg");
  if (!svg) return;
  for (const [dep] of fixed) {
    const group = svg.querySelector(`g.dependency.arc-group[data-dep="${dep}"]`);
    if (group) group.classList.add("fixed");
    const word = svg.querySelector(`g.word[data-id="${dep}"]`);
    if (word && state.walk) word.classList.add("annotated");
  }
  const ring = (dep, kind) => {
    const word = svg.querySelector(`g.word[data-id="${dep}"]`);
    if (!word) return;
    word.classList.add(kind);
    const box = word.getBBox();
    const rect = document.createElementNS("http://www.w3.org/2000/svg", "rect");
    rect.setAttribute("class", "focus-ring");
    rect.setAttribute("x", box.x - 4);
    rect.setAttribute("y", box.y - 3);
    rect.setAttribute("width", box.width + 8);
    rect.setAttribute("height", box.height + 6);
    rect.setAttribute("rx", 4);
    word.insertBefore(rect, word.firstChild.nextSibling);
  };
  if (current) {
    ring(current, "current");
    const arc = svg.querySelector(`g.dependency.arc-group[data-dep="${current}"]`);
    if (arc) arc.classList.add("current");
  }
  if (state.selected && state.selected.index === index && state.selected.dep !== current) {
    ring(state.selected.dep, "selected");
  }
}

function renderAll() {
  const main = $("trees");
  main.innerHTML = "";
  state.sentences.forEach((sentence, index) => {
    const element = figure(sentence, index);
    main.appendChild(element);
    decorate(element, index, sentence.fixed, null);
  });
  $("download").disabled = state.sentences.length === 0;
  showEdit();
  showHelp();
  fillRelations();
}

function fillRelations() {
  const seen = new Set();
  for (const s of state.sentences) for (const c of wordLines(s.conllu)) if (c[7] !== "_") seen.add(c[7]);
  $("relations").innerHTML = [...seen].sort().map((r) => `<option value="${esc(r)}">`).join("");
}

function showHelp() {
  const keys = (pairs) => pairs.map(([k, what]) => `<kbd>${k}</kbd> ${what}`).join(" · ");
  $("help").innerHTML = state.walk
    ? keys([["j", "/ → next"], ["k", "/ ← previous"], ["Enter", "accept"],
            ["1–4", "take the n-th most probable head"], ["0", "ROOT"],
            ["click a word", "make it the head"], ["r", "relation"], ["u", "undo"],
            ["s", "save"]])
    : state.sentences.length
      ? "Hover an arc for its marginal and the word's other heads. Click a word, then its "
        + "new head: the arc is fixed and the rest re-decoded. " + keys([
          ["0", "ROOT"], ["f", "free the word"], ["Esc", "cancel"], ["u", "undo"]])
      : "";
}

function wordForm(index, dep) {
  if (dep === 0) return "ROOT";
  const columns = wordLines(state.sentences[index].conllu).find((c) => Number(c[0]) === dep);
  return columns ? columns[1] : "?";
}

function showEdit() {
  const box = $("edit");
  const chosen = state.selected;
  if (!chosen || state.walk) { box.hidden = true; return; }
  box.hidden = false;
  $("edit-word").innerHTML = "";
  const form = document.createElement("span");
  form.className = "form";
  form.textContent = wordForm(chosen.index, chosen.dep) + " (" + chosen.dep + ")";
  $("edit-word").append("Click the new head of ", form, ", or:");
  const columns = wordLines(state.sentences[chosen.index].conllu)
    .find((c) => Number(c[0]) === chosen.dep);
  $("edit-rel").value = columns && columns[7] !== "_" ? columns[7] : "";
  $("edit-free").disabled = !state.sentences[chosen.index].fixed.has(chosen.dep);
}

/* The tooltip of an arc: its marginal, its relation's, and the word's most probable heads. */
function showInfo(event, index, dep) {
  const sentence = state.sentences[index];
  const columns = wordLines(sentence.conllu).find((c) => Number(c[0]) === dep);
  if (!columns) return;
  const head = Number(columns[6]);
  const box = $("info");
  const headProb = misc(columns, "HeadProb");
  const relProb = misc(columns, "DeprelProb");
  let html = `<div><b>${esc(columns[7])}</b>: ${esc(wordForm(index, head))} → `
    + `${esc(columns[1])} (${dep})</div>`;
  if (headProb !== null) html += `<div>head marginal <span class="prob">${headProb}</span>`
    + (relProb !== null ? `, relation <span class="prob">${relProb}</span>` : "") + "</div>";
  const fixed = fixedArcs(index).has(dep);
  if (fixed) html += "<div>fixed (the marginals are conditioned on it)</div>";
  const heads = (sentence.heads || {})[String(dep)] || [];
  if (heads.length) {
    html += "<table>" + heads.map(([h, p], n) => `<tr class="${h === head ? "shown" : ""}">`
      + `<td>${n + 1}</td><td>${esc(wordForm(index, h))}${h ? " (" + h + ")" : ""}</td>`
      + `<td class="prob">${p.toFixed(4)}</td><td><span class="bar" style="width:${
        Math.round(p * 80)}px"></span></td></tr>`).join("") + "</table>";
  }
  box.innerHTML = html;
  box.hidden = false;
  const x = Math.min(event.clientX + 14, window.innerWidth - box.offsetWidth - 8);
  const y = event.clientY + 16 + box.offsetHeight > window.innerHeight
    ? event.clientY - box.offsetHeight - 10 : event.clientY + 16;
  box.style.left = x + "px";
  box.style.top = y + "px";
}

function esc(text) {
  return String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;");
}

/* ---- the annotation walk ---------------------------------------------------------------- */

function isAnnotationFile(text) {
  return /^# selected_words = /m.test(text) || /^# select_order = /m.test(text);
}

/* The asked-for words of an annotation file, least confident first: by "# select_order" (the
   selection's rank), else by the pre-filled head's HeadProb. */
function walkItems(blocks) {
  const items = [];
  blocks.forEach((block, index) => {
    const words = wordLines(block);
    const selected = comment(block, "selected_words");
    const ids = selected ? selected.split(",").map(Number) : words.map((c) => Number(c[0]));
    const orders = (comment(block, "select_order") || "").split(",").filter(Boolean).map(Number);
    ids.forEach((dep, k) => {
      const columns = words.find((c) => Number(c[0]) === dep);
      const prob = columns ? Number(misc(columns, "HeadProb") ?? 1) : 1;
      const order = orders.length === ids.length ? orders[k] : orders.length ? orders[0] : null;
      items.push({ index, dep, order, prob, tie: k });
    });
  });
  const ranked = items.every((item) => item.order !== null);
  items.sort((a, b) => ranked
    ? a.order - b.order || a.index - b.index || a.tie - b.tie
    : a.prob - b.prob || a.index - b.index || a.dep - b.dep);
  return items;
}

async function startWalk(text, name) {
  const blocks = splitBlocks(text);
  state.walk = { original: blocks, items: walkItems(blocks), position: 0,
                 annotated: new Map(), name };
  state.sentences = blocks.map((block) => ({ conllu: block, svg: "", heads: {}, fixed: new Map(),
                                              parsed: false }));
  state.history = [];
  state.selected = null;
  if (document.activeElement) document.activeElement.blur(); // keys go to the walk
  $("walk").hidden = false;
  document.body.classList.add("walking");
  $("save").hidden = false;
  $("download").disabled = true;
  say(state.walk.items.length ? "" : "The file asks for no word.");
  await renderWalk();
}

function stopWalk() {
  state.walk = null;
  $("walk").hidden = true;
  $("save").hidden = true;
  document.body.classList.remove("walking");
}

function currentItem() {
  const walk = state.walk;
  return walk && walk.items.length ? walk.items[walk.position] : null;
}

/* Next asked-for word not yet annotated (after an accept or a fix). */
function advance() {
  const walk = state.walk;
  for (let step = 1; step <= walk.items.length; step++) {
    const position = (walk.position + step) % walk.items.length;
    const item = walk.items[position];
    if (!walk.annotated.has(item.index + ":" + item.dep)) { walk.position = position; return; }
  }
}

async function renderWalk() {
  const walk = state.walk;
  const item = currentItem();
  const main = $("trees");
  if (!item) { main.innerHTML = ""; return; }
  const sentence = state.sentences[item.index];
  if (!sentence.parsed) {
    await run(async () => {
      await redecode(item.index);
      sentence.parsed = true;
    });
  }
  const done = walk.annotated.size;
  $("walk-progress").textContent = `Word ${walk.position + 1} of ${walk.items.length}`
    + ` · ${done} annotated · sentence ${item.index + 1} of ${state.sentences.length}`
    + ` · ${walk.name}`;
  const columns = wordLines(sentence.conllu).find((c) => Number(c[0]) === item.dep) || [];
  const arc = walk.annotated.get(item.index + ":" + item.dep);
  const line = $("walk-word");
  line.innerHTML = "";
  const form = document.createElement("span");
  form.className = "form";
  form.textContent = `${columns[1]} (${item.dep})`;
  const headProb = misc(columns, "HeadProb");
  line.append(form, arc
    ? ` is annotated: head ${wordForm(item.index, arc.head)}, ${arc.deprel || "_"}`
    : ` → head ${wordForm(item.index, Number(columns[6]))} (${columns[7]})`
      + (headProb !== null ? `, marginal ${headProb}` : "")
      + (item.order !== null ? ` · selection rank ${item.order}` : ""));
  main.innerHTML = "";
  const element = figure(sentence, item.index);
  element.classList.add("current");
  main.appendChild(element);
  decorate(element, item.index, fixedArcs(item.index), item.dep);
  const word = element.querySelector("g.word.current");
  if (word) word.scrollIntoView({ block: "nearest", inline: "center" });
  showEdit();
  showHelp();
}

async function accept() {
  const item = currentItem();
  if (!item) return;
  const columns = wordLines(state.sentences[item.index].conllu)
    .find((c) => Number(c[0]) === item.dep);
  await fixArc(item.index, item.dep, Number(columns[6]), columns[7] === "_" ? null : columns[7]);
}

async function move(step) {
  const walk = state.walk;
  if (!walk || !walk.items.length) return;
  walk.position = Math.max(0, Math.min(walk.items.length - 1, walk.position + step));
  await renderWalk();
}

/* The annotator's file: the file as it came, the asked-for words' HEAD and DEPREL filled. */
function annotatedText() {
  const walk = state.walk;
  return walk.original.map((block, index) => block.split("\n").map((line) => {
    if (!/^\d+\t/.test(line)) return line;
    const columns = line.split("\t");
    const arc = walk.annotated.get(index + ":" + Number(columns[0]));
    if (!arc) return line;
    columns[6] = String(arc.head);
    columns[7] = arc.deprel || "_";
    return columns.join("\t");
  }).join("\n")).join("\n") + "\n";  // each block ends in a blank line, as CoNLL-U asks
}

function download(text, name) {
  const link = document.createElement("a");
  link.href = URL.createObjectURL(new Blob([text], { type: "text/plain;charset=utf-8" }));
  link.download = name;
  document.body.appendChild(link);
  link.click();
  setTimeout(() => { URL.revokeObjectURL(link.href); link.remove(); }, 0);
}

function save() {
  if (!state.walk) return;
  const name = state.walk.name.replace(/(\.conllu)?$/, "-done.conllu");
  download(annotatedText(), name);
  say(`Saved ${name}: ${state.walk.annotated.size} of ${state.walk.items.length} words `
      + "annotated (parser-train data.partial_trees=true reads it).", "note");
}

/* ---- events ---------------------------------------------------------------------------- */

function target(event) {
  const figureElement = event.target.closest("figure.tree");
  if (!figureElement) return null;
  const index = Number(figureElement.dataset.index);
  const word = event.target.closest("g.word");
  const arc = event.target.closest("g.dependency");
  return { index, word: word ? Number(word.dataset.id) : null,
           arc: arc ? Number(arc.dataset.dep) : null };
}

async function headChosen(index, head) {
  if (state.busy) return;
  if (state.walk) {
    const item = currentItem();
    if (item && item.index === index) await fixArc(index, item.dep, head, null);
    return;
  }
  const chosen = state.selected;
  if (!chosen || chosen.index !== index) {
    state.selected = { index, dep: head };
    renderAll();
  } else if (chosen.dep === head) {
    state.selected = null;
    renderAll();
  } else {
    await fixArc(index, chosen.dep, head, null);
  }
}

function bind() {
  const main = $("trees");
  main.addEventListener("click", (event) => {
    const hit = target(event);
    if (hit && hit.word !== null) headChosen(hit.index, hit.word);
  });
  main.addEventListener("mousemove", (event) => {
    const hit = target(event);
    if (hit && hit.arc !== null && event.target.closest("g.arc-group")) {
      showInfo(event, hit.index, hit.arc);
    } else {
      $("info").hidden = true;
    }
  });
  main.addEventListener("mouseleave", () => { $("info").hidden = true; });
  $("parse").addEventListener("click", parseText);
  $("file").addEventListener("change", async (event) => {
    const file = event.target.files[0];
    if (!file) return;
    const text = await file.text();
    event.target.value = "";
    if (isAnnotationFile(text)) {
      await startWalk(text, file.name);
    } else {
      $("text").value = text;
      $("input-format").value = looksConllu(text) ? "conllu" : "auto";
      await parseText();
      state.fileName = file.name.replace(/(\.conllu|\.txt)?$/, ".parsed.conllu");
    }
  });
  $("download").addEventListener("click", () => {
    download(state.sentences.map((s) => s.conllu.trimEnd() + "\n\n").join(""), state.fileName);
  });
  $("save").addEventListener("click", save);
  $("walk-prev").addEventListener("click", () => move(-1));
  $("walk-next").addEventListener("click", () => move(1));
  $("walk-accept").addEventListener("click", accept);
  $("walk-undo").addEventListener("click", undo);
  $("edit-root").addEventListener("click", () => state.selected
    && fixArc(state.selected.index, state.selected.dep, 0, null));
  $("edit-rel-set").addEventListener("click", setRelation);
  $("edit-rel").addEventListener("keydown", (event) => {
    if (event.key === "Enter") { event.preventDefault(); setRelation(); }
  });
  $("edit-free").addEventListener("click", () => state.selected
    && freeWord(state.selected.index, state.selected.dep));
  $("edit-cancel").addEventListener("click", () => { state.selected = null; renderAll(); });
  document.addEventListener("keydown", onKey);
}

async function setRelation() {
  const chosen = state.selected;
  const deprel = $("edit-rel").value.trim();
  if (!chosen || !deprel) return;
  const columns = wordLines(state.sentences[chosen.index].conllu)
    .find((c) => Number(c[0]) === chosen.dep);
  await fixArc(chosen.index, chosen.dep, Number(columns[6]), deprel);
}

async function walkRelation() {
  const item = currentItem();
  if (!item) return;
  const columns = wordLines(state.sentences[item.index].conllu)
    .find((c) => Number(c[0]) === item.dep);
  const deprel = window.prompt(`Relation of ${columns[1]} (${item.dep}):`, columns[7]);
  if (deprel && deprel.trim()) {
    await fixArc(item.index, item.dep, Number(columns[6]), deprel.trim());
  }
}

async function onKey(event) {
  const typing = event.target.closest("input, textarea, select, dialog");
  if (typing || event.ctrlKey || event.metaKey || event.altKey || state.busy) return;
  const key = event.key;
  if (state.walk) {
    const item = currentItem();
    const actions = {
      j: () => move(1), ArrowRight: () => move(1), ArrowDown: () => move(1),
      k: () => move(-1), ArrowLeft: () => move(-1), ArrowUp: () => move(-1),
      Enter: accept, u: undo, s: save, r: walkRelation,
      0: () => item && fixArc(item.index, item.dep, 0, null),
    };
    if (/^[1-4]$/.test(key) && item) {
      const heads = (state.sentences[item.index].heads || {})[String(item.dep)] || [];
      const choice = heads[Number(key) - 1];
      if (choice) { event.preventDefault(); await fixArc(item.index, item.dep, choice[0], null); }
      return;
    }
    if (actions[key]) {
      event.preventDefault();
      await actions[key]();
    }
    return;
  }
  if (key === "u") { event.preventDefault(); undo(); }
  if (key === "Escape" && state.selected) { state.selected = null; renderAll(); }
  if (key === "0" && state.selected) {
    await fixArc(state.selected.index, state.selected.dep, 0, null);
  }
  if (key === "f" && state.selected) await freeWord(state.selected.index, state.selected.dep);
}

async function start() {
  bind();
  showTokenState();
  showHelp();
  await run(loadModels);
}

start();
