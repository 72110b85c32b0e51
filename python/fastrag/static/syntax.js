// A small syntax highlighter: a tokenizer per language (Python, Markdown, and a generic one for
// configuration files, shell and C-like code) that returns [class, text] tokens, and a renderer that
// builds one element per line with its line number. Text is only ever set with textContent: no HTML
// from a file or from the model is interpreted.
"use strict";

const FastragSyntax = (() => {
  const PY_KEYWORDS = new Set((
    "False None True and as assert async await break class continue def del elif else except finally " +
    "for from global if import in is lambda nonlocal not or pass raise return try while with yield match case"
  ).split(" "));
  const PY_BUILTINS = new Set((
    "abs all any bool bytes callable dict dir enumerate filter float format getattr hasattr hash id int " +
    "isinstance issubclass iter len list map max min next object open print property range repr reversed " +
    "round set setattr slice sorted staticmethod classmethod str sum super tuple type zip self cls"
  ).split(" "));

  // Each rule: [class, sticky regex]. The first rule that matches at the current position wins.
  const PYTHON = [
    ["comment", /#[^\n]*/y],
    ["string", /[rRbBuUfF]{0,2}("""|''')[\s\S]*?(?:\1|$)/y],
    ["string", /[rRbBuUfF]{0,2}(?:"(?:[^"\\\n]|\\.)*"?|'(?:[^'\\\n]|\\.)*'?)/y],
    ["decorator", /@[A-Za-z_][\w.]*/y],
    ["number", /(?:0[xXoObB][\da-fA-F_]+|\d[\d_]*(?:\.\d[\d_]*)?(?:[eE][+-]?\d+)?j?|\.\d[\d_]*)\b/y],
    ["name", /[A-Za-z_]\w*/y],
    ["space", /\s+/y],
    ["punct", /[^\w\s]/y],
  ];
  const GENERIC = [
    ["comment", /(?:#|\/\/)[^\n]*/y],
    ["comment", /\/\*[\s\S]*?(?:\*\/|$)/y],
    ["string", /"(?:[^"\\\n]|\\.)*"?|'(?:[^'\\\n]|\\.)*'?/y],
    ["number", /\b\d[\d_.]*\b/y],
    ["name", /[A-Za-z_][\w-]*/y],
    ["space", /\s+/y],
    ["punct", /[^\w\s]/y],
  ];
  const C_KEYWORDS = new Set((
    "auto break case char const continue default do double else enum extern float for goto if inline int " +
    "long register return short signed sizeof static struct switch typedef union unsigned void volatile while " +
    "class namespace template typename public private protected virtual bool true false nullptr " +
    "export set if then fi do done function local echo true false null"
  ).split(" "));

  function scan(text, rules, classify) {
    const tokens = [];
    let at = 0;
    while (at < text.length) {
      let matched = false;
      for (const [cls, re] of rules) {
        re.lastIndex = at;
        const m = re.exec(text);
        if (m && m[0].length > 0) {
          tokens.push([classify(cls, m[0], tokens), m[0]]);
          at += m[0].length;
          matched = true;
          break;
        }
      }
      if (!matched) {
        tokens.push(["", text[at]]);
        at += 1;
      }
    }
    return tokens;
  }

  function previousWord(tokens) {
    for (let i = tokens.length - 1; i >= 0; i -= 1) {
      if (tokens[i][0] !== "space") return tokens[i][1];
    }
    return "";
  }

  function python(text) {
    return scan(text, PYTHON, (cls, word, tokens) => {
      if (cls !== "name") return cls;
      if (PY_KEYWORDS.has(word)) return "keyword";
      const before = previousWord(tokens);
      if (before === "def" || before === "class") return "title";
      if (PY_BUILTINS.has(word)) return "builtin";
      return "";
    });
  }

  function generic(text) {
    return scan(text, GENERIC, (cls, word) => (cls === "name" ? (C_KEYWORDS.has(word) ? "keyword" : "") : cls));
  }

  // Markdown, line by line: headings, fenced code (Python fences highlighted as Python), inline code,
  // links, emphasis and list markers.
  const INLINE = [
    ["string", /`[^`\n]+`/y],
    ["link", /\[[^\]\n]+\]\([^)\s]+\)/y],
    ["strong", /\*\*[^*\n]+\*\*|__[^_\n]+__/y],
    ["emphasis", /\*[^*\s][^*\n]*\*/y],
    ["text", /[^`[*_\n]+/y],
    ["text", /[\s\S]/y],
  ];

  function markdown(text) {
    const tokens = [];
    let fence = null;
    let code = "";
    const lines = text.split(/(?<=\n)/);
    for (const line of lines) {
      const fenceMatch = /^\s*(```|~~~)\s*([\w+-]*)/.exec(line);
      if (fence !== null) {
        if (fenceMatch && fenceMatch[1] === fence.marker) {
          tokens.push(...(fence.lang === "python" || fence.lang === "py" ? python(code) : generic(code)));
          tokens.push(["punct", line]);
          fence = null;
          code = "";
        } else {
          code += line;
        }
        continue;
      }
      if (fenceMatch) {
        fence = { marker: fenceMatch[1], lang: fenceMatch[2].toLowerCase() };
        tokens.push(["punct", line]);
        continue;
      }
      if (/^\s{0,3}#{1,6}\s/.test(line) || /^[=\-~^"]{3,}\s*$/.test(line)) {
        tokens.push(["title", line]);
        continue;
      }
      const list = /^(\s*)([-*+]|\d+[.)])(\s+)/.exec(line);
      let rest = line;
      if (list) {
        tokens.push(["", list[1]], ["keyword", list[2]], ["", list[3]]);
        rest = line.slice(list[0].length);
      }
      tokens.push(...scan(rest, INLINE, (cls) => (cls === "text" ? "" : cls)));
    }
    if (fence !== null) tokens.push(...(fence.lang === "python" || fence.lang === "py" ? python(code) : generic(code)));
    return tokens;
  }

  function languageOf(path) {
    const name = path.toLowerCase();
    if (name.endsWith(".py") || name.endsWith(".pyi")) return "python";
    if (name.endsWith(".md") || name.endsWith(".markdown") || name.endsWith(".rst")) return "markdown";
    return "generic";
  }

  function tokenize(text, language) {
    if (language === "python") return python(text);
    if (language === "markdown") return markdown(text);
    return generic(text);
  }

  // Fill `pre` with one <span class="line"> per line (CSS numbers them from `firstLine`).
  function render(pre, text, path, firstLine) {
    pre.replaceChildren();
    pre.style.counterReset = `line ${Math.max(0, (firstLine || 1) - 1)}`;
    const language = languageOf(path);
    pre.dataset.language = language;
    let line = document.createElement("span");
    line.className = "line";
    const lines = [line];
    for (const [cls, value] of tokenize(text, language)) {
      const parts = value.split("\n");
      parts.forEach((part, i) => {
        if (i > 0) {
          line = document.createElement("span");
          line.className = "line";
          lines.push(line);
        }
        if (!part) return;
        if (cls && cls !== "space" && cls !== "punct") {
          const span = document.createElement("span");
          span.className = `tok-${cls}`;
          span.textContent = part;
          line.appendChild(span);
        } else {
          line.appendChild(document.createTextNode(part));
        }
      });
    }
    if (lines.length > 1 && lines[lines.length - 1].childNodes.length === 0) lines.pop();
    // Lines stay inline, separated by real newlines: the text copied from the block is the file's text.
    lines.forEach((el, i) => {
      if (i > 0) pre.appendChild(document.createTextNode("\n"));
      pre.appendChild(el);
    });
  }

  return { tokenize, render, languageOf };
})();
