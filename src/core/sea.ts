/**
 * Whether this process is mailsend's single executable (Node's single-executable application, built
 * by `npm run dist`): the program is the executable itself, with every module inside its one script.
 */
export function isSingleExecutable(): boolean {
  // By getBuiltinModule: an ES import of node:sea would fail where a Node lacks the module.
  const sea = process.getBuiltinModule("node:sea") as { isSea?: () => boolean } | undefined;
  return sea?.isSea?.() === true;
}
