/**
 * The descriptors a backend inherits, by name, from the addon's table
 * (`crates/bridge-launch`, the one definition for every host): stdin,
 * stdout, stderr, the supervisor's control socket, and the host channel
 * when a start declares it. No spawner writes a descriptor number itself.
 */
import { native } from "../native";

export type ChannelName = "stdin" | "stdout" | "stderr" | "control" | "host";

const layout = native.channelLayout();

/** Each channel's descriptor number in the backend (control: in its supervisor). */
export const CHANNEL_FD: Readonly<Record<ChannelName, number>> = Object.freeze(
  Object.fromEntries(layout.channels.map((channel) => [channel.name, channel.fd])) as Record<ChannelName, number>,
);

/** The variable that tells the backend its host channel's number (docs/host-channel.md §2). */
export const HOST_CHANNEL_ENV: string = layout.hostChannelEnv;

/**
 * `spawn`'s `stdio` array: each given descriptor at its channel's number,
 * `"ignore"` where a channel is not given (a gap below a given one).
 */
export function stdioByChannel(given: Partial<Record<ChannelName, number>>): (number | "ignore")[] {
  const stdio: (number | "ignore")[] = [];
  for (const [name, fd] of Object.entries(given) as [ChannelName, number | undefined][]) {
    if (fd !== undefined) stdio[CHANNEL_FD[name]] = fd;
  }
  for (let at = 0; at < stdio.length; at += 1) stdio[at] ??= "ignore";
  return stdio;
}
