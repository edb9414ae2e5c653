/**
 * One file per conversation: the file name is the conversation id made safe
 * for every file system this package runs on, and reversible, so that two
 * ids never share a file. Bytes of the id's UTF-8 outside `[a-z0-9_-]` are
 * written `%XX` (upper case letters too: macOS and Windows compare names
 * without case, so `User` and `user` would share a file), and a name Windows
 * reserves for a device (`con`, `nul`, `com1`, …) has its first character
 * escaped.
 */
import { InvalidConversationIdError } from "../../errors";

/** The longest escaped id (a file name holds 255 bytes; the temporary file adds a dot and `.json.tmp`). */
export const MAX_STEM_BYTES = 200;

const SAFE = /^[a-z0-9_-]$/;
const WINDOWS_DEVICE = /^(con|prn|aux|nul|com[0-9]|lpt[0-9])$/;

function escapeByte(byte: number): string {
  return `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
}

/** The escaped id every file of the conversation is named after (`InvalidConversationIdError` when too long). */
export function fileStem(id: string): string {
  let stem = "";
  for (const byte of Buffer.from(id, "utf8")) {
    const char = String.fromCharCode(byte);
    stem += SAFE.test(char) ? char : escapeByte(byte);
  }
  if (WINDOWS_DEVICE.test(stem)) stem = escapeByte(stem.charCodeAt(0)) + stem.slice(1);
  if (stem.length > MAX_STEM_BYTES) {
    throw new InvalidConversationIdError(
      `The conversation id is too long for the disk store: ${stem.length} bytes as a file name, at most ${MAX_STEM_BYTES} ` +
        "(each byte outside a-z, 0-9, - and _ takes three).",
    );
  }
  return stem;
}

/** The id a stem was made from (the inverse of `fileStem`), or `undefined` when it is not one. */
export function idOfStem(stem: string): string | undefined {
  try {
    return decodeURIComponent(stem);
  } catch {
    return undefined;
  }
}
