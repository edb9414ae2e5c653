// filled below
export {};
