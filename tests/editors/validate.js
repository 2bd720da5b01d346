// Validates documents the way editors do, and prints one JSON line per file:
//   {"file": ..., "diagnostics": [{"line", "col", "message", "source"}]}   (1-based positions)
//
//   node validate.js yaml FILE...   yaml-language-server's language service; each file finds
//                                   its schema through its own "# yaml-language-server:
//                                   $schema=..." modeline, exactly as in the editor
//   node validate.js json FILE...   vscode-json-languageservice (VS Code's JSON engine); each
//                                   file finds its schema through its "$schema" key
//   node validate.js complete-yaml|complete-json FILE LINE COL
//                                   what the same engine offers to complete at LINE:COL
//                                   (1-based): {"file": ..., "labels": [...]}
//
// Schemas are read from disk only: a request for any other URI is answered with an error, so
// a test can never pass by fetching something from the network.
"use strict";

const fs = require("fs");
const path = require("path");
const { URI } = require("vscode-uri");
const { TextDocument } = require("vscode-languageserver-textdocument");

function readSchema(uri) {
  const parsed = URI.parse(uri);
  if (parsed.scheme !== "file") {
    return Promise.reject(`refusing to fetch ${uri}: only local schema files are allowed`);
  }
  try {
    return Promise.resolve(fs.readFileSync(parsed.fsPath, "utf8"));
  } catch (err) {
    return Promise.reject(`cannot read schema ${uri}: ${err.message}`);
  }
}

const workspaceContext = {
  resolveRelativePath: (relative, resource) =>
    URI.file(path.resolve(path.dirname(URI.parse(resource).fsPath), relative)).toString(),
};

function shape(diagnostic) {
  return {
    line: diagnostic.range.start.line + 1,
    col: diagnostic.range.start.character + 1,
    message: diagnostic.message,
    source: diagnostic.source || "",
  };
}

async function yamlDiagnostics(files) {
  const { getLanguageService } = require("yaml-language-server");
  const service = getLanguageService({
    schemaRequestService: readSchema,
    workspaceContext,
  });
  service.configure({ validate: true, hover: true, completion: true, yamlVersion: "1.2" });
  const out = [];
  for (const file of files) {
    const uri = URI.file(path.resolve(file)).toString();
    const text = fs.readFileSync(file, "utf8");
    const document = TextDocument.create(uri, "yaml", 1, text);
    out.push({ file, diagnostics: (await service.doValidation(document, false)).map(shape) });
  }
  return out;
}

async function jsonDiagnostics(files) {
  const json = require("vscode-json-languageservice");
  const service = json.getLanguageService({ schemaRequestService: readSchema, workspaceContext });
  service.configure({ validate: true, allowComments: false });
  const out = [];
  for (const file of files) {
    const uri = URI.file(path.resolve(file)).toString();
    const document = TextDocument.create(uri, "json", 1, fs.readFileSync(file, "utf8"));
    const parsed = service.parseJSONDocument(document);
    const diagnostics = await service.doValidation(document, parsed, {
      schemaValidation: "error",
      trailingCommas: "error",
      comments: "error",
    });
    out.push({ file, diagnostics: diagnostics.map(shape) });
  }
  return out;
}

async function completions(language, file, line, col) {
  const uri = URI.file(path.resolve(file)).toString();
  const document = TextDocument.create(uri, language, 1, fs.readFileSync(file, "utf8"));
  const position = { line: line - 1, character: col - 1 };
  let list;
  if (language === "yaml") {
    const { getLanguageService } = require("yaml-language-server");
    const service = getLanguageService({ schemaRequestService: readSchema, workspaceContext });
    service.configure({ validate: true, completion: true, yamlVersion: "1.2" });
    list = await service.doComplete(document, position, false);
  } else {
    const json = require("vscode-json-languageservice");
    const service = json.getLanguageService({ schemaRequestService: readSchema, workspaceContext });
    service.configure({ validate: true, allowComments: false });
    list = await service.doComplete(document, position, service.parseJSONDocument(document));
  }
  return { file, labels: ((list && list.items) || []).map((item) => item.label) };
}

async function main() {
  const [mode, ...files] = process.argv.slice(2);
  if (mode === "complete-yaml" || mode === "complete-json") {
    const [file, line, col] = files;
    const result = await completions(mode.slice("complete-".length), file, +line, +col);
    process.stdout.write(JSON.stringify(result) + "\n");
    return;
  }
  const engines = { yaml: yamlDiagnostics, json: jsonDiagnostics };
  if (!engines[mode] || files.length === 0) {
    process.stderr.write("usage: node validate.js yaml|json FILE... | complete-yaml|complete-json FILE LINE COL\n");
    process.exit(2);
  }
  for (const result of await engines[mode](files)) {
    process.stdout.write(JSON.stringify(result) + "\n");
  }
}

main().catch((err) => {
  process.stderr.write(String((err && err.stack) || err) + "\n");
  process.exit(1);
});
