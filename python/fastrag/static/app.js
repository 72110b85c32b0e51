// The page: search (GET /search), ask (POST /answer, streamed as server-sent events read with fetch),
// and a dialog showing a cited span (GET /span). Everything comes from this server.
// A server bound off loopback wants a bearer token: the page is opened as /?token=..., and every
// request sends that token as `Authorization: Bearer` (never in a URL of its own).
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const form = $("search-form");
  const query = $("query");
  const kInput = $("k");
  const mode = $("mode");
  const pathInput = $("path");
  const langInput = $("lang");
  const askButton = $("ask-button");
  const searchButton = $("search-button");
  const status = $("status");
  const results = $("results");
  const answerSection = $("answer-section");
  const answerBox = $("answer");
  const cited = $("cited");
  const citedHeading = $("cited-heading");
  const dialog = $("span-dialog");
  const CITATION = /\[([^\[\]\s:]+):(\d+)-(\d+)\]/g;
  const TOKEN = new URLSearchParams(window.location.search).get("token");

  // fetch with the page's token, if it was opened with one
  function call(url, init = {}) {
    const headers = new Headers(init.headers || {});
    if (TOKEN) headers.set("authorization", `Bearer ${TOKEN}`);
    return fetch(url, { ...init, headers, referrerPolicy: "no-referrer" });
  }

  function say(message, isError = false) {
    status.textContent = message;
    status.classList.toggle("error", isError);
    status.setAttribute("role", isError ? "alert" : "status");
  }

  function params() {
    return {
      query: query.value.trim(),
      k: Number(kInput.value),
      mode: mode.value,
      path: pathInput.value.split(/\s+/).filter(Boolean),
      lang: langInput.value.trim(),
    };
  }

  // The search's query string: path repeated once per glob, lang only when set.
  function searchQuery(p) {
    const q = new URLSearchParams({ query: p.query, k: String(p.k), mode: p.mode });
    for (const glob of p.path) q.append("path", glob);
    if (p.lang) q.set("lang", p.lang);
    return q;
  }

  async function errorOf(response) {
    try {
      const body = await response.json();
      return body.error || `HTTP ${response.status}`;
    } catch (_) {
      return `HTTP ${response.status}`;
    }
  }

  function lineLabel(first, last) {
    if (first == null) return "";
    return first === last ? `line ${first}` : `lines ${first}–${last}`;
  }

  // ------------------------------------------------------------------ search

  function renderResults(data) {
    results.replaceChildren();
    for (const hit of data.results) {
      const li = document.createElement("li");
      li.className = "result";
      li.id = `result-${hit.rank}`;
      const head = document.createElement("div");
      head.className = "result-head";
      const path = document.createElement("a");
      path.className = "path";
      path.href = spanUrl(hit.file_path, hit.first_character_index, hit.last_character_index);
      path.textContent = hit.file_path;
      path.addEventListener("click", (event) => {
        event.preventDefault();
        openSpan(hit.file_path, hit.first_character_index, hit.last_character_index);
      });
      const where = document.createElement("span");
      where.className = "where";
      where.textContent = `${lineLabel(hit.first_line, hit.last_line)} · characters ` +
        `${hit.first_character_index}–${hit.last_character_index} · score ${hit.score.toFixed(2)}`;
      head.append(path, where);
      const pre = document.createElement("pre");
      pre.className = "code";
      pre.tabIndex = 0;
      pre.setAttribute("aria-label", `${hit.file_path}, ${lineLabel(hit.first_line, hit.last_line)}`);
      FastragSyntax.render(pre, hit.text ?? "(file not readable)", hit.file_path, hit.first_line);
      li.append(head, pre);
      results.appendChild(li);
    }
  }

  async function search(event) {
    event.preventDefault();
    const p = params();
    if (!p.query) {
      say("Type a question first.", true);
      query.focus();
      return;
    }
    const started = performance.now();
    say("Searching…");
    clearAll(); // a new query: nothing of the previous one stays on the page
    searchButton.disabled = true;
    try {
      const url = `/search?${searchQuery(p)}`;
      const response = await call(url, { headers: { accept: "application/json" } });
      if (!response.ok) {
        say(await errorOf(response), true);
        return;
      }
      const data = await response.json();
      renderResults(data);
      const ms = Math.round(performance.now() - started);
      const cache = response.headers.get("x-cache") === "hit" ? ", cached" : "";
      const found = data.results.length ? `${data.results.length} results in ${ms} ms${cache}.` : "No match.";
      say(data.searched !== data.query ? `Searched for “${data.searched}”: ${found}` : found);
    } catch (error) {
      say(`Search failed: ${error.message}`, true);
    } finally {
      searchButton.disabled = false;
    }
  }

  // ------------------------------------------------------------------ answers

  function spanUrl(path, start, end) {
    return `/span?${new URLSearchParams({ path, start: String(start), end: String(end) })}`;
  }

  function citationLink(path, start, end, label) {
    const a = document.createElement("a");
    a.className = "citation";
    a.href = spanUrl(path, start, end);
    a.textContent = label;
    a.dataset.path = path;
    a.addEventListener("click", (event) => {
      event.preventDefault();
      const [from, to] = enclosing(path, Number(start), Number(end));
      openSpan(path, from, to, [Number(start), Number(end)]);
    });
    return a;
  }

  // Answer text with every [path:first-last] turned into a link that opens the span.
  function renderAnswer(text) {
    answerBox.replaceChildren();
    let at = 0;
    for (const m of text.matchAll(CITATION)) {
      answerBox.append(document.createTextNode(text.slice(at, m.index)));
      answerBox.append(citationLink(m[1], m[2], m[3], m[0]));
      at = m.index + m[0].length;
    }
    answerBox.append(document.createTextNode(text.slice(at)));
  }

  // The retrieved spans of the last answer: a citation opens the whole span it lies in.
  let sources = [];

  function clearAll() {
    results.replaceChildren();
    answerSection.hidden = true;
    answerBox.replaceChildren();
    cited.replaceChildren();
    citedHeading.hidden = true;
    sources = [];
  }

  // The retrieved span holding characters [start, end) of path, else that range itself.
  function enclosing(path, start, end) {
    const s = sources.find((x) => x.file_path === path &&
      x.first_character_index <= start && end <= x.last_character_index);
    return s ? [s.first_character_index, s.last_character_index] : [start, end];
  }

  function renderCited(payload) {
    cited.replaceChildren();
    for (const c of payload.cited) {
      const li = document.createElement("li");
      li.append(citationLink(c.file_path, c.first_character_index, c.last_character_index, c.citation));
      cited.appendChild(li);
    }
    citedHeading.hidden = payload.cited.length === 0;
  }

  // Parse a server-sent-events body as it arrives; call onEvent(name, data) for each event.
  async function readEvents(response, onEvent) {
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        let name = "message";
        const data = [];
        for (const line of block.split("\n")) {
          if (line.startsWith("event:")) name = line.slice(6).trim();
          else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
        }
        if (data.length) onEvent(name, JSON.parse(data.join("\n")));
      }
    }
  }

  async function ask() {
    const p = params();
    if (!p.query) {
      say("Type a question first.", true);
      query.focus();
      return;
    }
    clearAll(); // a new question: nothing of the previous one stays on the page
    answerSection.hidden = false;
    answerBox.dataset.state = "streaming";
    answerBox.dataset.pieces = "0";
    answerBox.setAttribute("aria-busy", "true");
    answerBox.replaceChildren();
    cited.replaceChildren();
    citedHeading.hidden = true;
    askButton.disabled = true;
    say("Thinking… (the model loads on the first question)");
    const started = performance.now();
    let text = "";
    sources = [];
    try {
      const response = await call("/answer", {
        method: "POST",
        headers: { "content-type": "application/json", accept: "text/event-stream" },
        body: JSON.stringify({ query: p.query, k: p.k, mode: p.mode, stream: true }),
      });
      if (!response.ok) {
        answerBox.dataset.state = "error";
        say(await errorOf(response), true);
        return;
      }
      let model = "";
      await readEvents(response, (name, data) => {
        if (name === "message") {
          text += data;
          answerBox.dataset.pieces = String(Number(answerBox.dataset.pieces) + 1);
          renderAnswer(text);
        } else if (name === "sources") {
          model = data.model ? ` by ${data.model}` : "";
          sources = data.sources || [];
          renderAnswer(data.answer);
          renderCited(data);
        } else if (name === "error") {
          answerBox.dataset.state = "error";
          say(data.error, true);
        } else if (name === "done") {
          answerBox.dataset.state = "done";
          say(`Answered${model} in ${((performance.now() - started) / 1000).toFixed(1)} s.`);
        }
      });
      if (answerBox.dataset.state === "streaming") {
        answerBox.dataset.state = "error";
        say("The answer stream ended early.", true);
      }
    } catch (error) {
      answerBox.dataset.state = "error";
      say(`Asking failed: ${error.message}`, true);
    } finally {
      answerBox.setAttribute("aria-busy", "false");
      askButton.disabled = false;
    }
  }

  // ------------------------------------------------------------------ cited spans

  // Show path[start:end] (the whole retrieved span), and which of its lines `cite` ([start, end)) covers.
  async function openSpan(path, start, end, cite = null) {
    const code = $("span-code");
    $("span-title").textContent = path;
    $("span-where").textContent = "Loading…";
    code.replaceChildren();
    if (!dialog.open) dialog.showModal();
    try {
      const response = await call(spanUrl(path, start, end));
      if (!response.ok) {
        $("span-where").textContent = await errorOf(response);
        return;
      }
      const span = await response.json();
      let where = `${lineLabel(span.first_line, span.last_line)} · characters ${span.start}–${span.end}`;
      if (cite && (cite[0] !== span.start || cite[1] !== span.end)) {
        const before = span.text.slice(0, cite[0] - span.start);
        const first = span.first_line + (before.match(/\n/g) || []).length;
        const inside = span.text.slice(cite[0] - span.start, Math.max(cite[0], cite[1] - 1) - span.start);
        where += ` · cited: ${lineLabel(first, first + (inside.match(/\n/g) || []).length)}`;
      }
      $("span-where").textContent = where;
      FastragSyntax.render(code, span.text, span.file_path, span.first_line);
      code.scrollTop = 0;
      code.focus();
    } catch (error) {
      $("span-where").textContent = `Could not load the span: ${error.message}`;
    }
  }

  $("span-close").addEventListener("click", () => dialog.close());
  dialog.addEventListener("click", (event) => {
    if (event.target === dialog) dialog.close(); // a click on the backdrop
  });
  // Which repository this server serves, and how many files (GET /healthz).
  async function served() {
    try {
      const response = await call("/healthz");
      if (!response.ok) return;
      const health = await response.json();
      const name = health.repository || "the index";
      $("served").textContent = health.generation
        ? `Serving ${name}: ${health.files} files, ${health.chunks} chunks.`
        : "No index yet: run `fastrag index` in the repository.";
    } catch (_) {
      // the page works without it
    }
  }

  form.addEventListener("submit", search);
  served();
  askButton.addEventListener("click", ask);
  document.body.dataset.ready = "true";
})();
